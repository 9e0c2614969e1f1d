"""`lomo health`: whether this container's Lomo process answers its health endpoint.

One image runs every part, so its HEALTHCHECK cannot name the part: it is read from the
command line of PID 1 (`lomo api`, `lomo worker`, ...), which is the part's own process in
a container. The worker has no HTTP API; its metrics listener opens only once it has
connected to Temporal and built its worker, so an answer there means it polls."""

from __future__ import annotations

from pathlib import Path

import httpx

from lomo.settings import Settings

PARTS = ("api", "worker", "memory", "sim")


def endpoint(settings: Settings, part: str) -> str | None:
    """The URL that answers 200 while `part` serves; None for a worker without metrics."""
    port, path = {
        "api": (settings.api_port, "/healthz"),
        "memory": (settings.memory_port, "/healthz"),
        "sim": (settings.sim_port, "/healthz"),
        "worker": (settings.worker_metrics_port, "/metrics"),
    }[part]
    return f"http://127.0.0.1:{port}{path}" if port else None


def part_of(cmdline: list[str]) -> str | None:
    """The part a `lomo` command line runs: the first argument that names one."""
    return next((a for a in cmdline[1:] if a in PARTS), None)


def container_part(proc: Path = Path("/proc/1/cmdline")) -> str | None:
    try:
        raw = proc.read_bytes()
    except OSError:
        return None
    return part_of([a.decode(errors="replace") for a in raw.split(b"\0") if a])


def check(settings: Settings, part: str, timeout: float = 3.0) -> tuple[bool, str]:
    """(healthy, what was asked and what answered)."""
    url = endpoint(settings, part)
    if url is None:
        return True, f"{part}: no health endpoint (LOMO_WORKER_METRICS_PORT=0)"
    try:
        r = httpx.get(url, timeout=timeout)
    except httpx.HTTPError as e:
        return False, f"{part}: {url}: {e!r}"
    return r.status_code == 200, f"{part}: {url}: {r.status_code}"

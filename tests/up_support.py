"""Helpers for tests of `lomo up` as a person runs it: start it on free ports, read its
stack file, stop it with SIGTERM and check no child survives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import free_port


def up_env(**extra: str) -> dict[str, str]:
    env = dict(
        os.environ,
        LOMO_API_PORT=str(free_port()),
        LOMO_TEMPORAL_PORT=str(free_port()),
        LOMO_TEMPORAL_UI_PORT=str(free_port()),
        LOMO_SIM_PORT=str(free_port()),
        LOMO_MEMORY_PORT=str(free_port()),
        LOMO_WORKER_METRICS_PORT="0",
        LOMO_SIM_SPEED="0.05",
        LOMO_MODEL_PROVIDER="offline",
    )
    env.pop("LOMO_DATA_DIR", None)
    env.pop("LOMO_DATABASE_URL", None)
    env.pop("LOMO_MEMORY_URL", None)
    env.update(extra)
    return env


def start_up(
    data_dir: Path,
    env: dict[str, str],
    *args: str,
    within: float = 120,
    command: list[str] | None = None,
    cwd: Path | None = None,
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """`args`: more options of `lomo up` (`--workers 2`); `within`: seconds to be ready;
    `command`: the `lomo` to run (default: this interpreter's)."""
    log = data_dir.parent / f"{data_dir.name}-lomo-up.log"
    lomo = command or [sys.executable, "-m", "cli.main"]
    proc = subprocess.Popen(
        [*lomo, "up", "--data-dir", str(data_dir), *args],
        env=env,
        cwd=cwd,
        # A file, not a pipe nobody reads: a long crash loop's log lines must not block it.
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    stack_file = data_dir / "stack.json"
    deadline = time.monotonic() + within
    while not stack_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out = log.read_text(errors="replace")
            proc.kill()
            raise AssertionError(f"lomo up did not become ready:\n{out[-3000:]}")
        time.sleep(0.2)
    return proc, json.loads(stack_file.read_text())


def stop_up(proc: subprocess.Popen[bytes], stack: dict[str, Any]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    for name, pid in stack["pids"].items():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        # A zombie that is already reaped by init is fine; a live child is not.
        status = Path(f"/proc/{pid}/status").read_text() if Path(f"/proc/{pid}").exists() else ""
        assert "zombie" in status or not status, f"{name} (pid {pid}) still running"


@contextmanager
def running_up(
    data_dir: Path, env: dict[str, str], *args: str, within: float = 120
) -> Iterator[dict[str, Any]]:
    """`lomo up` for the block (see `start_up`), stopped and checked gone after it."""
    proc, stack = start_up(data_dir, env, *args, within=within)
    try:
        yield stack
    finally:
        stop_up(proc, stack)


def all_events(api: httpx.Client) -> list[dict[str, Any]]:
    r = api.get("/v1/events", params={"once": "true"})
    return [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]


def until(check: Callable[[], Any], within: float, what: str) -> Any:
    """Poll a sync check against a live stack until it answers something truthy."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if out := check():
            return out
        time.sleep(0.2)
    raise AssertionError(f"not within {within:.0f} s: {what}")

"""`lomo up`: the embedded stack as child processes, each also runnable alone.

The topology on one machine: the Temporal dev server, the simulator, the memory service
(the one owner of the vector index, so any number of workers share it), N workers and M
api replicas, each replica on its own port. Children are named after their part, the
second and later ones numbered (`worker`, `worker-2`, `api`, `api-2`)."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from cli.supervise import Backoff, Supervisor
from lomo.install import write_private
from lomo.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Part:
    """One child: its name in stack.json, its `lomo` command and what its env changes."""

    name: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


def _spawn(part: Part, settings: Settings, logs: Path) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        LOMO_DATA_DIR=str(settings.data_dir.resolve()),
        LOMO_MEMORY_URL=memory_url(settings),
        **dict(part.env),
    )
    with open(logs / f"{part.name}.log", "ab") as out:  # the child keeps its own copy of the fd
        return subprocess.Popen(
            [sys.executable, "-m", "cli.main", *part.argv], env=env, stdout=out, stderr=out
        )


def memory_url(settings: Settings) -> str:
    return f"http://{settings.host}:{settings.memory_port}"


def _numbered(part: str, i: int) -> str:
    return part if i == 0 else f"{part}-{i + 1}"


def _os_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class Topology:
    """How many workers and api replicas, and the port of each replica (the first on
    `api_port`, the others on ports free when the stack starts)."""

    workers: int
    api_ports: list[int]

    @classmethod
    def of(cls, settings: Settings, workers: int, apis: int) -> Topology:
        extra = [_os_port(settings.host) for _ in range(apis - 1)]
        return cls(workers, [settings.api_port, *extra])

    def worker_parts(self, settings: Settings) -> list[Part]:
        parts = []
        for i in range(self.workers):
            # One metrics listener each: the first on the configured port, the next above it.
            port = settings.worker_metrics_port + i if settings.worker_metrics_port else 0
            parts.append(
                Part(
                    _numbered("worker", i), ("worker",), (("LOMO_WORKER_METRICS_PORT", str(port)),)
                )
            )
        return parts

    def api_parts(self) -> list[Part]:
        # `lomo up` migrated the database already: replicas do not race to migrate it.
        return [
            Part(_numbered("api", i), ("api", "--no-migrate"), (("LOMO_API_PORT", str(port)),))
            for i, port in enumerate(self.api_ports)
        ]

    def api_urls(self, settings: Settings) -> list[str]:
        return [f"http://{settings.host}:{p}" for p in self.api_ports]


def _wait_http(
    url: str,
    proc: subprocess.Popen[bytes],
    timeout: float,
    ours: Callable[[Any], bool],
    headers: dict[str, str] | None = None,
) -> None:
    """Wait until our own server answers at `url`: a 200 whose JSON `ours` recognises. Any
    other answer (a 404 from some other server that holds the port) is not readiness."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {proc.returncode}")
        try:
            r = httpx.get(url, timeout=1.0, headers=headers)
            if r.status_code == 200 and ours(r.json()):
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def _ports_in_use(settings: Settings) -> list[str]:
    """The ports `lomo up` is about to bind that something else already holds."""
    wanted = {
        "api (LOMO_API_PORT)": settings.api_port,
        "simulator (LOMO_SIM_PORT)": settings.sim_port,
        "Temporal (LOMO_TEMPORAL_PORT)": settings.temporal_port,
        "Temporal UI (LOMO_TEMPORAL_UI_PORT)": settings.temporal_ui_port,
        "memory service (LOMO_MEMORY_PORT)": settings.memory_port,
    }
    taken = []
    for what, port in wanted.items():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not "taken"
            try:
                s.bind((settings.host, port))
            except OSError:
                taken.append(f"{what} {settings.host}:{port}")
    return taken


def _wait_temporal(settings: Settings, proc: subprocess.Popen[bytes], timeout: float) -> None:
    host, port = settings.resolved_temporal_address.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"temporal exited with {proc.returncode}")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((host, int(port))) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError("temporal did not answer")


def _is_lomo_memory(body: Any) -> bool:
    return isinstance(body, dict) and body.get("service") == "lomo-memory"


def _is_lomo_api(body: Any) -> bool:
    return (
        isinstance(body, dict) and body.get("service") == "lomo-api" and body.get("ready") is True
    )


def _demo_token(settings: Settings) -> str:
    """The demo user is created once per data dir; its token is kept beside the data."""
    import asyncio

    from lomo.auth import create_user
    from lomo.db.engine import Database

    path = settings.data_dir / "demo_token"
    if path.exists():
        return path.read_text().strip()

    async def make() -> str:
        db = Database(settings.resolved_database_url)
        try:
            async with db.session() as s:
                _, token = await create_user(s, "demo")
            return token
        finally:
            await db.dispose()

    token = asyncio.run(make())
    path.write_text(token)
    path.chmod(0o600)
    return token


def up(settings: Settings, workers: int = 1, apis: int = 1, ready_timeout: float = 120.0) -> int:
    """Start every part, then supervise: a part that dies is restarted (cli/supervise.py);
    only Ctrl-C/SIGTERM, or a part that fails its first start, stops the stack."""
    from lomo.db.migrate import upgrade

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    logs = settings.data_dir / "logs"
    logs.mkdir(exist_ok=True)
    stack_file = settings.data_dir / "stack.json"
    stack_file.unlink(missing_ok=True)  # written again only once every part answers
    if taken := _ports_in_use(settings):
        log.error("cannot start: in use already: %s (another lomo up?)", ", ".join(taken))
        return 1
    topology = Topology.of(settings, workers, apis)
    upgrade(settings.resolved_database_url)
    token = _demo_token(settings)
    stack: dict[str, Any] = {}
    stopping = False

    def write_stack() -> None:
        if stack:  # empty until every part answers
            _write_stack(stack_file, stack, sup)

    sup = Supervisor(_backoff(settings), on_change=write_stack)

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    def start(part: Part) -> subprocess.Popen[bytes]:
        def spawn() -> subprocess.Popen[bytes]:
            return _spawn(part, settings, logs)

        proc = spawn()
        sup.add(part.name, spawn, proc)
        return proc

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        try:
            _start_parts(settings, topology, start, ready_timeout)
        except (RuntimeError, TimeoutError) as e:
            log.error("the stack did not start (%s; see %s); stopping", e, logs)
            return 1
        stack.update(_stack_info(settings, topology, token))
        write_stack()
        sys.stdout.write(_banner(stack, stack_file))
        sys.stdout.flush()
        while not stopping:
            sup.tick()
            time.sleep(0.2)
        return 0
    finally:
        sup.stop()
        stack_file.unlink(missing_ok=True)


def _backoff(settings: Settings) -> Backoff:
    return Backoff(
        settings.restart_initial_seconds,
        settings.restart_max_seconds,
        settings.restart_reset_seconds,
    )


def _start_parts(
    settings: Settings,
    topology: Topology,
    start: Callable[[Part], subprocess.Popen[bytes]],
    ready_timeout: float,
) -> None:
    """Start the parts in the order they need each other, each once the one before answers;
    raises RuntimeError or TimeoutError when a part does not come up."""
    _wait_temporal(settings, start(Part("temporal", ("temporal",))), ready_timeout)
    sim_url = f"{settings.resolved_sim_url}/jobs"
    sim_auth = {"Authorization": f"Bearer {settings.sim_token.get_secret_value()}"}
    _wait_http(
        sim_url, start(Part("sim", ("sim",))), ready_timeout, lambda b: "jobs" in b, sim_auth
    )
    memory = start(Part("memory", ("memory",)))
    _wait_http(f"{memory_url(settings)}/healthz", memory, ready_timeout, _is_lomo_memory)
    workers = [start(p) for p in topology.worker_parts(settings)]
    for part, url in zip(topology.api_parts(), topology.api_urls(settings), strict=True):
        _wait_http(f"{url}/readyz", start(part), ready_timeout, _is_lomo_api)
    time.sleep(0.5)
    for worker in workers:
        if worker.poll() is not None:
            raise RuntimeError(f"a worker exited with {worker.returncode}")


def _stack_info(settings: Settings, topology: Topology, token: str) -> dict[str, Any]:
    """Where the running stack answers, and its tokens: the body of stack.json (`api_url`
    is the first of `api_urls`)."""
    return {
        "api_url": settings.resolved_api_url,
        "api_urls": topology.api_urls(settings),
        "memory_url": memory_url(settings),
        "workers": topology.workers,
        "app_url": f"{settings.resolved_api_url}/",
        "docs_url": f"{settings.resolved_api_url}/docs",
        "temporal_address": settings.resolved_temporal_address,
        "temporal_ui_url": settings.temporal_ui_url,
        "sim_url": settings.resolved_sim_url,
        "admin_token": settings.admin_token.get_secret_value(),
        "callback_secret": settings.callback_secret.get_secret_value(),
        "sim_token": settings.sim_token.get_secret_value(),
        "demo_token": token,
    }


def _write_stack(stack_file: Path, stack: dict[str, Any], sup: Supervisor) -> None:
    """Refresh the children's pids and states in `stack` and replace stack.json atomically
    (owner-only: it holds the secrets)."""
    stack.update(pids=sup.pids(), restarts={n: c.restarts for n, c in sup.children.items()})
    stack["processes"] = sup.view()
    write_private(stack_file, json.dumps(stack, indent=2))


def _banner(stack: dict[str, Any], stack_file: Path) -> str:
    token = stack["demo_token"]
    return (
        # The token rides in the fragment: the browser never sends it to the server.
        f"Lomo is up. Open {stack['app_url']}#token={token}\n"
        f"  API docs:     {stack['docs_url']}\n"
        f"  Temporal UI:  {stack['temporal_ui_url']}\n  Simulator:    {stack['sim_url']}\n"
        f"  Demo token:   {token}\n  Stack file:   {stack_file}\n"
        "(a part that dies is restarted; Ctrl-C stops everything)\n"
    )

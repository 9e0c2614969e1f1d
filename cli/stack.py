"""`lomo up`: the embedded stack as child processes, each also runnable alone."""

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
from pathlib import Path
from typing import Any

import httpx

from cli.supervise import Backoff, Supervisor
from lomo.install import write_private
from lomo.settings import Settings

log = logging.getLogger(__name__)


def _spawn(part: str, settings: Settings, logs: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, LOMO_DATA_DIR=str(settings.data_dir.resolve()))
    with open(logs / f"{part}.log", "ab") as out:  # the child keeps its own copy of the fd
        return subprocess.Popen(
            [sys.executable, "-m", "cli.main", part], env=env, stdout=out, stderr=out
        )


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


def up(settings: Settings, ready_timeout: float = 120.0) -> int:
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

    def start(part: str) -> subprocess.Popen[bytes]:
        def spawn() -> subprocess.Popen[bytes]:
            return _spawn(part, settings, logs)

        proc = spawn()
        sup.add(part, spawn, proc)
        return proc

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        try:
            _start_parts(settings, start, ready_timeout)
        except (RuntimeError, TimeoutError) as e:
            log.error("the stack did not start (%s; see %s); stopping", e, logs)
            return 1
        stack.update(_stack_info(settings, token))
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
    settings: Settings, start: Callable[[str], subprocess.Popen[bytes]], ready_timeout: float
) -> None:
    """Start the parts in the order they need each other, each once the one before answers;
    raises RuntimeError or TimeoutError when a part does not come up."""
    _wait_temporal(settings, start("temporal"), ready_timeout)
    sim_url = f"{settings.resolved_sim_url}/jobs"
    sim_auth = {"Authorization": f"Bearer {settings.sim_token.get_secret_value()}"}
    _wait_http(sim_url, start("sim"), ready_timeout, lambda b: "jobs" in b, sim_auth)
    worker = start("worker")
    api_ready = f"{settings.resolved_api_url}/readyz"
    _wait_http(api_ready, start("api"), ready_timeout, _is_lomo_api)
    time.sleep(0.5)
    if worker.poll() is not None:
        raise RuntimeError(f"worker exited with {worker.returncode}")


def _stack_info(settings: Settings, token: str) -> dict[str, Any]:
    """Where the running stack answers, and its tokens: the body of stack.json."""
    return {
        "api_url": settings.resolved_api_url,
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

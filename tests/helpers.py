"""Shared test plumbing: free ports, uvicorn servers in threads, polling."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

from lomo.settings import Settings

# Ports the tests hand to servers come from below the kernel's ephemeral range (32768+),
# where the OS picks the random ports of every other process: the Temporal dev server binds
# its HTTP API, metrics and internal services to such random ports, and one of them once
# took a port a test had just chosen for the api (CI saw the dev server's 404 instead of
# the app). Each xdist worker owns its own slice, walked in order, so no two test
# processes ever hand out the same port either.
# LOMO_TEST_PORT_BASE moves the whole range, for two checkouts testing on one machine.
_PORT_BASE = int(os.environ.get("LOMO_TEST_PORT_BASE", "20000"))
_PORT_SLICE = 1_500
_next_port: int | None = None


def _slice_start() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    return _PORT_BASE + (index % 8) * _PORT_SLICE


def free_port() -> int:
    global _next_port
    start = _slice_start()
    if _next_port is None:
        _next_port = start
    for _ in range(_PORT_SLICE):
        port = _next_port
        _next_port = start + (_next_port + 1 - start) % _PORT_SLICE
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken by something outside the tests; try the next one
            return port
    raise RuntimeError(f"no free port in {start}..{start + _PORT_SLICE}")


class ThreadServer:
    """A real uvicorn server on a free port, in a thread (real HTTP, no ASGI shortcut)."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.port = port or free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 90  # a loaded 2-core machine can take long to start one
        while not self.server.started:
            if time.monotonic() > deadline:
                raise TimeoutError("server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


async def eventually(
    check: Callable[[], Awaitable[Any]], within: float = 30.0, interval: float = 0.1
) -> Any:
    """Poll until `check` returns something truthy (bounded); return it."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {within} s (last: {last!r})")


def sim_auth(settings: Settings) -> dict[str, str]:
    """The header the simulator's fault and listing endpoints need."""
    return {"Authorization": f"Bearer {settings.sim_token.get_secret_value()}"}

"""Supervision of `lomo up`'s children: a process that dies is started again, with backoff.

Each child is a small state machine: `running` → (exits) → `backoff` → (delay passed) →
`running`. The delay doubles from `restart_initial_seconds` up to `restart_max_seconds`
and starts again from the initial value once the child ran `restart_reset_seconds`
without dying, so a crash loop is slowed down and reported (`state`, `restarts`,
`last_exit`, `backoff_seconds` in stack.json) instead of spun. The durable state lives in
Temporal and the DB, so restarting a child loses nothing: the api is stateless, the
worker's running activities are retried by Temporal after their heartbeat timeout, and the
dev server starts again on the same SQLite file.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

Spawn = Callable[[], subprocess.Popen[bytes]]


@dataclass
class Backoff:
    initial: float
    maximum: float
    reset_after: float

    def delay(self, failures_in_a_row: int) -> float:
        return float(min(self.maximum, self.initial * 2 ** max(0, failures_in_a_row - 1)))


@dataclass
class Child:
    name: str
    spawn: Spawn
    proc: subprocess.Popen[bytes]
    started_at: float
    state: str = "running"  # running | backoff
    restarts: int = 0
    failures_in_a_row: int = 0
    last_exit: int | None = None
    backoff_seconds: float = 0.0
    restart_at: float = 0.0
    delays: list[float] = field(default_factory=list)  # every backoff taken, for the report

    def view(self) -> dict[str, Any]:
        return {
            "pid": self.proc.pid,
            "state": self.state,
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "backoff_seconds": self.backoff_seconds,
            "delays": self.delays[-20:],
        }


class Supervisor:
    """Watches the children and restarts those that exit; `tick` is one pass, so the
    loop around it (and tests) decide the pace."""

    def __init__(self, backoff: Backoff, on_change: Callable[[], None]) -> None:
        self.backoff = backoff
        self.children: dict[str, Child] = {}
        self.on_change = on_change

    def add(self, name: str, spawn: Spawn, proc: subprocess.Popen[bytes]) -> None:
        self.children[name] = Child(name, spawn, proc, time.monotonic())

    def tick(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        changed = False
        for c in self.children.values():
            if c.state == "running" and c.proc.poll() is not None:
                self._exited(c, now)
                changed = True
            elif c.state == "backoff" and now >= c.restart_at:
                c.proc = c.spawn()
                c.started_at, c.state, c.restarts = now, "running", c.restarts + 1
                log.warning("%s restarted (restart %d), pid %d", c.name, c.restarts, c.proc.pid)
                changed = True
        if changed:
            self.on_change()

    def _exited(self, c: Child, now: float) -> None:
        code = c.proc.returncode
        if now - c.started_at >= self.backoff.reset_after:
            c.failures_in_a_row = 0  # it was healthy for a while: not a crash loop
        c.failures_in_a_row += 1
        c.last_exit, c.state = code, "backoff"
        c.backoff_seconds = self.backoff.delay(c.failures_in_a_row)
        c.delays.append(c.backoff_seconds)
        c.restart_at = now + c.backoff_seconds
        how = f"signal {-code}" if code is not None and code < 0 else f"status {code}"
        loop = f" ({c.failures_in_a_row} failures in a row)" if c.failures_in_a_row > 1 else ""
        log.error("%s exited with %s%s; restarting in %.1f s", c.name, how, loop, c.backoff_seconds)

    def pids(self) -> dict[str, int]:
        return {n: c.proc.pid for n, c in self.children.items()}

    def view(self) -> dict[str, dict[str, Any]]:
        return {n: c.view() for n, c in self.children.items()}

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM in reverse start order (api first, Temporal last), then SIGKILL."""
        procs = [c.proc for c in reversed(list(self.children.values()))]
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

"""Faults mixed into a scenario run (`lomo scenarios --faults`): at seeded random moments
(every 20-45 s) the worker or the Temporal dev server is SIGKILLed (`lomo up` restarts it), the
simulator duplicates, reorders or drops callbacks for a while, and on the Postgres
configuration the harness's private cluster crashes and comes back. A submit whose answer
times out after the vendor made the job is in the mix: the order is sent again with its
idempotency key and the job adopted (docs/architecture.md#money), so nothing is generated
twice or lost. Failing generations are left out: those are refunded by design, not faults the
figures can stay at 0 through."""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field

import httpx

from scenarios.stack import Stack, StackError

log = logging.getLogger(__name__)
SIM_FAULTS: tuple[dict[str, object], ...] = (
    {"duplicate_callbacks": 2},
    {"out_of_order": True},
    {"drop_callbacks": True},
    {"duplicate_callbacks": 1, "out_of_order": True, "latency_scale": 3.0},
    # Longer than the platform's submit timeout (LOMO_GENERATION_SUBMIT_TIMEOUT_SECONDS, 10).
    {"submit_timeout_after_create": True, "submit_timeout_seconds": 12.0},
)


@dataclass
class Injector:
    stack: Stack
    seed: int
    # Seconds between faults. A restarted worker takes 20-60 s to poll again on a loaded
    # 2-core machine: faults much faster than that only measure an empty stack.
    every: tuple[float, float] = (20.0, 45.0)
    done: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def kinds(self) -> list[str]:
        kinds = ["worker", "worker", "temporal", "sim"]
        return kinds + (["postgres"] if self.stack.postgres is not None else [])

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="faults", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
        self._sim({}, reset=True)

    def _loop(self) -> None:
        rng = random.Random(self.seed)
        while not self._stop.wait(rng.uniform(*self.every)):
            kind = rng.choice(self.kinds())
            try:
                self._inject(kind, rng)
            except (OSError, StackError, httpx.HTTPError) as e:
                self._note(f"{kind}: could not inject ({e})")
                log.warning("fault %s not injected: %s", kind, e)

    def _note(self, what: str) -> None:
        self.done.append(f"{time.strftime('%H:%M:%S')} {what}")

    def _inject(self, kind: str, rng: random.Random) -> None:
        if kind in ("worker", "temporal"):
            pid = self.stack.pids().get(kind)
            if pid is None:
                return
            os.kill(pid, signal.SIGKILL)
            self._note(f"{kind} SIGKILLed (pid {pid})")
        elif kind == "sim":
            faults = rng.choice(SIM_FAULTS)
            self._sim(faults)
            self._note(f"simulator faults {faults}")
            self._stop.wait(rng.uniform(*self.every))
            self._sim({}, reset=True)
        elif kind == "postgres" and self.stack.postgres is not None:
            self.stack.postgres.restart()
            self._note("postgres crashed and restarted")

    def _sim(self, faults: dict[str, object], reset: bool = False) -> None:
        url, auth = f"{self.stack.sim_url}/sim/faults", self.stack.sim_auth
        # A story's scene (a slow vendor the person acts during) holds through a fault
        # spell and is what a spell ends in: a wiped scene is a different story.
        scene = dict(self.stack.scene)
        deadline = time.monotonic() + 30
        while True:  # the simulator is never killed, but it may be busy
            try:
                if reset:  # the simulator merges a POST: clear first, then the scene
                    httpx.delete(url, headers=auth, timeout=5).raise_for_status()
                if not reset or scene:
                    body = scene if reset else {**faults, **scene}
                    httpx.post(url, json=body, headers=auth, timeout=5).raise_for_status()
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

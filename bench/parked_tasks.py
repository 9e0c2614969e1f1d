"""Waiting is free: N tasks parked on generation jobs with one worker process.

    .venv/bin/python bench/parked_tasks.py [--tasks 500] [--window 30] [--checkpoints 1000,5000]

Starts a Temporal dev server, the generation simulator (jobs held far longer than the
run) and one real `lomo worker` process with the offline model; starts N lightweight
image tasks straight on their workflows; waits until every task is parked on its job;
then reports the worker's resident memory (idle, and with N parked), the history events
and Temporal actions each parked task cost to get there, and what a parked task costs
while it waits (events and model calls over a window: both should be zero). With
`--checkpoints` it prints the worker's RSS at each count on the way (the trend: the SDK's
default workflow cache keeps at most 1,000 workflows, so memory should level off there).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from sqlalchemy import func, select
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from lomo.db.engine import Database
from lomo.db.migrate import upgrade
from lomo.db.models import ModelStep, Task
from lomo.ids import new_id
from lomo.settings import Settings
from lomo.temporal import start_dev_server
from sim.app import create_app as create_sim
from tests.helpers import ThreadServer, free_port, sim_auth
from tests.runtime_support import add_message, kill, new_user, spawn_worker, worker_env
from workflows.task import TaskWorkflow
from workflows.types import TaskInput

# Events that Temporal Cloud bills as actions (a parked task should add none).
ACTION_EVENTS = {
    "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED",
    "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
    "EVENT_TYPE_TIMER_STARTED",
    "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED",
    "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED",
    "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES",
}


WARMUP = 20
SETTLED = ("waiting_generation", "completed", "failed")


async def add_task(db: Database, user: str, text: str) -> tuple[str, str]:
    tid = new_id("tsk")
    async with db.session() as s:
        s.add(Task(id=tid, user_id=user, kind="lightweight", status="running", goal=text))
    return tid, await add_message(db, user, tid, text)


async def _parked(db: Database) -> int:
    return (await _settled(db)).get("waiting_generation", 0)


async def _settled(db: Database) -> dict[str, int]:
    """Tasks by status; a task is settled once parked or ended (an overloaded submit can
    time out, be refunded and end the task: counted, reported, not waited for)."""
    async with db.session() as s:
        rows = await s.execute(select(Task.status, func.count()).group_by(Task.status))
    return {status: int(n) for status, n in rows.all()}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _connect(address: str) -> Client:
    for _ in range(100):
        try:
            return await Client.connect(address)
        except RuntimeError:
            await asyncio.sleep(0.2)
    raise RuntimeError("temporal did not start")


class Stack:
    """The Temporal dev server, the simulator and the database one run shares."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.db_url = f"sqlite+aiosqlite:///{tmp / 'lomo.db'}"
        self.settings = Settings(data_dir=tmp)
        self.sim_port = free_port()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def lomo_env(self) -> dict[str, str]:
        return worker_env(
            self.tmp,
            self.db_url,
            self.address,
            "bench",
            LOMO_SIM_PORT=str(self.sim_port),
            LOMO_MODEL_PROVIDER="offline",
            LOMO_GENERATION_WAIT_SECONDS="3600",  # no compensating poll in the window
            # Every image within the free amounts: no price card parks a task elsewhere.
            LOMO_DAILY_FREE_CENTS="100000000",
            LOMO_INITIAL_CREDIT_CENTS="100000000",
            # A loaded machine must not turn slow submits into refunded failures.
            LOMO_GENERATION_SUBMIT_TIMEOUT_SECONDS="120",
        )


class LomoSide:
    """N lightweight image tasks started straight on their workflows, parked on their jobs."""

    def __init__(self, stack: Stack, db: Database, client: Client) -> None:
        self.stack, self.db, self.client = stack, db, client
        self.handles: list[Any] = []
        self.gate = asyncio.Semaphore(8)  # workflow starts in flight at once
        self.writing = asyncio.Lock()  # one SQLite writer in this process
        self.user = ""

    async def start_one(self, n: int) -> None:
        async with self.gate:
            async with self.writing:
                tid, mid = await add_task(self.db, self.user, f"Generate an image of cat {n}")
            h = await self.client.start_workflow(
                TaskWorkflow.run,
                TaskInput(tid, self.user, "lightweight", mid, generation_wait_seconds=3600.0),
                id=f"task:{tid}",
                task_queue="bench",
            )
        self.handles.append(h)

    async def park(self, count: int) -> None:
        base = len(self.handles)
        await asyncio.gather(*(self.start_one(base + i) for i in range(count)))
        while True:
            by_status = await _settled(self.db)
            if sum(by_status.get(k, 0) for k in SETTLED) >= len(self.handles):
                return
            await asyncio.sleep(1)


class BareSide:
    """The same count of bare workflows parked on a signal, in a worker of their own."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.count = 0

    async def park(self, count: int) -> None:
        gate = asyncio.Semaphore(8)

        async def one(i: int) -> Any:
            async with gate:
                return await self.client.start_workflow(
                    "BareParked", f"cat {i}", id=f"bare-{i}", task_queue="bench-bare"
                )

        waiting = list(await asyncio.gather(*(one(self.count + i) for i in range(count))))
        self.count += count
        # Parked once its first workflow task completed (visibility has no history length).
        while waiting:
            lengths = await asyncio.gather(*(h.describe() for h in waiting))
            waiting = [h for h, d in zip(waiting, lengths, strict=True) if d.history_length < 3]
            await asyncio.sleep(1)


def per_task_kb(before_mb: float, after_mb: float, count: int) -> float:
    return (after_mb - before_mb) * 1024 / count


def spawn_bare(stack: Stack) -> subprocess.Popen[bytes]:
    out = (stack.tmp / "bare.log").open("ab")
    script = str(Path(__file__).with_name("bare_parked.py"))
    return subprocess.Popen(
        [sys.executable, script, stack.address, "bench-bare"],
        stdout=out,
        stderr=out,
        start_new_session=True,
    )


async def measure_bare(stack: Stack, client: Client, n: int) -> tuple[float, float, float]:
    """(idle, warm, loaded) RSS in MB of a bare worker parking WARMUP then n workflows."""
    bare = spawn_bare(stack)
    try:
        await asyncio.sleep(4)
        idle = rss_mb(bare.pid)
        side = BareSide(client)
        await side.park(WARMUP)
        warm = rss_mb(bare.pid)
        await side.park(n - WARMUP)
        return idle, warm, rss_mb(bare.pid)
    finally:
        kill(bare)


async def measure_lomo(
    side: LomoSide, pid: int, n: int, checkpoints: list[int]
) -> tuple[float, float, float, float]:
    """Parks WARMUP then n Lomo tasks; returns idle, warm and loaded RSS, and seconds."""
    await asyncio.sleep(8)  # imports and first poll
    idle = rss_mb(pid)
    side.user = await new_user(side.db)
    # A warm-up batch first: first-use imports and caches are not per-task costs.
    await side.park(WARMUP)
    warm = rss_mb(pid)
    t0 = time.monotonic()
    for mark in [c for c in checkpoints if WARMUP < c < n] + [n]:
        await side.park(mark - len(side.handles))
        print(
            f"  {mark} parked after {time.monotonic() - t0:.0f} s: worker RSS {rss_mb(pid):.0f} MB",
            flush=True,
        )
    return idle, warm, rss_mb(pid), time.monotonic() - t0


async def report_waiting(db: Database, side: LomoSide, n: int, window: float) -> None:
    """What a parked task costs while it waits: events and model calls over a window."""
    sample = side.handles[:: max(1, n // 20)]
    before = [len((await h.fetch_history()).events) for h in sample]
    kinds: Counter[str] = Counter()
    for h in sample:
        for e in (await h.fetch_history()).events:
            kinds[EventType.Name(e.event_type)] += 1
    async with db.session() as s:
        steps_before = await s.scalar(select(func.count()).select_from(ModelStep))
    await asyncio.sleep(window)
    after = [len((await h.fetch_history()).events) for h in sample]
    async with db.session() as s:
        steps_after = await s.scalar(select(func.count()).select_from(ModelStep))
    actions = sum(v for k, v in kinds.items() if k in ACTION_EVENTS) / len(sample)
    print(
        f"history to park: {sum(before) / len(before):.1f} events, {actions:.1f} actions per task"
    )
    print(
        f"while parked for {window:.0f} s: "
        f"{sum(after) - sum(before)} new events over {len(sample)} sampled tasks, "
        f"{(steps_after or 0) - (steps_before or 0)} model calls over all {n}"
    )


async def main(n: int, window: float, checkpoints: list[int], bare: bool) -> None:
    stack = Stack(Path(tempfile.mkdtemp(prefix="lomo-parked-")))
    server = start_dev_server(None, "127.0.0.1", stack.port, None, stack.tmp / "temporal.log")
    upgrade(stack.db_url)
    db = Database(stack.db_url)
    sim = create_sim(
        stack.tmp / "sim",
        stack.settings.callback_secret.get_secret_value(),
        speed=1.0,
        token=stack.settings.sim_token.get_secret_value(),
    )
    worker = spawn_worker(stack.lomo_env(), stack.tmp / "worker.log")
    try:
        client = await _connect(stack.address)
        with ThreadServer(sim, stack.sim_port) as sim_srv:
            headers = sim_auth(stack.settings)
            async with httpx.AsyncClient(base_url=sim_srv.url, headers=headers) as http:
                await http.post("/sim/faults", json={"latency_scale": 10_000})  # hours
            side = LomoSide(stack, db, client)
            idle, warm, loaded, took = await measure_lomo(side, worker.pid, n, checkpoints)
            ended = {k: v for k, v in (await _settled(db)).items() if k != "waiting_generation"}
            print(
                f"tasks parked: {await _parked(db)} of {n} in {took:.0f} s after {WARMUP} "
                f"warm-up (one worker); not parked: {ended or 'none'}"
            )
            lomo_kb = per_task_kb(warm, loaded, n - WARMUP)
            print(
                f"lomo worker RSS: idle {idle:.0f} MB, {WARMUP} parked {warm:.0f} MB, {n} parked "
                f"{loaded:.0f} MB: {lomo_kb:.1f} KB per further parked task (workflow cache on)"
            )
            if bare:
                b_idle, b_warm, b_loaded = await measure_bare(stack, client, n)
                bare_kb = per_task_kb(b_warm, b_loaded, n - WARMUP)
                print(
                    f"bare worker RSS: idle {b_idle:.0f} MB, {WARMUP} parked {b_warm:.0f} MB, "
                    f"{n} parked {b_loaded:.0f} MB: {bare_kb:.1f} KB per further parked workflow"
                )
                print(f"lomo / bare per cached parked workflow: {lomo_kb / bare_kb:.2f}x")
            await report_waiting(db, side, n, window)
    finally:
        kill(worker)
        server.terminate()
        server.wait(timeout=15)
        await db.dispose()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", type=int, default=500)
    p.add_argument("--window", type=float, default=30.0)
    p.add_argument("--checkpoints", default="", help="counts to report RSS at, e.g. 1000,5000")
    p.add_argument(
        "--bare",
        action="store_true",
        help="also park a bare workflow, for KB per task side by side",
    )
    a = p.parse_args()
    marks = sorted(int(c) for c in a.checkpoints.split(",") if c)
    asyncio.run(main(a.tasks, a.window, marks, a.bare))

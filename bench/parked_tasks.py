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


async def main(n: int, window: float, checkpoints: list[int]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lomo-parked-"))
    port = free_port()
    server = start_dev_server(None, "127.0.0.1", port, None, tmp / "temporal.log")
    db_url = f"sqlite+aiosqlite:///{tmp / 'lomo.db'}"
    upgrade(db_url)
    db = Database(db_url)
    settings = Settings(data_dir=tmp)
    sim_port = free_port()
    sim = create_sim(
        tmp / "sim",
        settings.callback_secret.get_secret_value(),
        speed=1.0,
        token=settings.sim_token.get_secret_value(),
    )
    worker = None
    try:
        client = await _connect(f"127.0.0.1:{port}")
        with ThreadServer(sim, sim_port) as sim_srv:
            async with httpx.AsyncClient(base_url=sim_srv.url, headers=sim_auth(settings)) as http:
                await http.post("/sim/faults", json={"latency_scale": 10_000})  # hours
            env = worker_env(
                tmp,
                db_url,
                f"127.0.0.1:{port}",
                "bench",
                LOMO_SIM_PORT=str(sim_port),
                LOMO_MODEL_PROVIDER="offline",
                LOMO_GENERATION_WAIT_SECONDS="3600",  # no compensating poll in the window
                # Every image within the free amounts: no price card parks a task elsewhere.
                LOMO_DAILY_FREE_CENTS="100000000",
                LOMO_INITIAL_CREDIT_CENTS="100000000",
                # A loaded machine must not turn slow submits into refunded failures.
                LOMO_GENERATION_SUBMIT_TIMEOUT_SECONDS="120",
            )
            worker = spawn_worker(env, tmp / "worker.log")
            await asyncio.sleep(8)  # imports and first poll
            idle = rss_mb(worker.pid)
            user = await new_user(db)
            handles: list[Any] = []

            gate = asyncio.Semaphore(8)  # workflow starts in flight at once
            writing = asyncio.Lock()  # one SQLite writer in this process

            async def start_one(n: int) -> None:
                async with gate:
                    async with writing:
                        tid, mid = await add_task(db, user, f"Generate an image of cat {n}")
                    h = await client.start_workflow(
                        TaskWorkflow.run,
                        TaskInput(tid, user, "lightweight", mid, generation_wait_seconds=3600.0),
                        id=f"task:{tid}",
                        task_queue="bench",
                    )
                handles.append(h)

            async def park(count: int) -> None:
                base = len(handles)
                await asyncio.gather(*(start_one(base + i) for i in range(count)))
                while True:
                    by_status = await _settled(db)
                    if sum(by_status.get(k, 0) for k in SETTLED) >= len(handles):
                        break
                    await asyncio.sleep(1)

            # A warm-up batch first: first-use imports and caches are not per-task costs.
            await park(WARMUP)
            warm = rss_mb(worker.pid)
            t0 = time.monotonic()
            for mark in [c for c in checkpoints if WARMUP < c < n] + [n]:
                await park(mark - len(handles))
                print(
                    f"  {mark} parked after {time.monotonic() - t0:.0f} s: "
                    f"worker RSS {rss_mb(worker.pid):.0f} MB",
                    flush=True,
                )
            took = time.monotonic() - t0
            loaded = rss_mb(worker.pid)
            sample = handles[:: max(1, n // 20)]
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
            events_per_task = sum(before) / len(before)
            actions = sum(v for k, v in kinds.items() if k in ACTION_EVENTS) / len(sample)
            ended = {k: v for k, v in (await _settled(db)).items() if k != "waiting_generation"}
            print(
                f"tasks parked: {await _parked(db)} of {n} in {took:.0f} s after {WARMUP} "
                f"warm-up (one worker); not parked: {ended or 'none'}"
            )
            print(
                f"worker RSS: idle {idle:.0f} MB, {WARMUP} parked {warm:.0f} MB, {n} parked "
                f"{loaded:.0f} MB: {(loaded - warm) * 1024 / (n - WARMUP):.1f} KB per further "
                "parked task (workflow cache on)"
            )
            print(f"history to park: {events_per_task:.1f} events, {actions:.1f} actions per task")
            print(
                f"while parked for {window:.0f} s: "
                f"{sum(after) - sum(before)} new events over {len(sample)} sampled tasks, "
                f"{(steps_after or 0) - (steps_before or 0)} model calls over all {n}"
            )
    finally:
        if worker is not None:
            kill(worker)
        server.terminate()
        server.wait(timeout=15)
        await db.dispose()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", type=int, default=500)
    p.add_argument("--window", type=float, default=30.0)
    p.add_argument("--checkpoints", default="", help="counts to report RSS at, e.g. 1000,5000")
    a = p.parse_args()
    marks = sorted(int(c) for c in a.checkpoints.split(",") if c)
    asyncio.run(main(a.tasks, a.window, marks))

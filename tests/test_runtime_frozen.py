"""A paused worker is fenced (the article's §4.2 and §11.1): a real `lomo worker` process
is frozen with SIGSTOP in the middle of a paid generation call, after the order was
reserved and while the upstream POST is in flight. Its heartbeat stops, so Temporal retries
the call on the second worker, which sends the same idempotency key, adopts the one job
and finishes the task (the result presented, the order settled). Then the frozen worker is
resumed with SIGCONT: its POST answers, it stores what it holds and tries to complete the
call. That late result changes nothing: no second job, order, charge, reply or event, and
no row it could touch differs. The timeline is printed (`-s`) and kept in the worker logs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from lomo.db.models import Event, GenerationOrder, ModelStep, Task, ToolCall
from money.models import LedgerEntry
from tests.helpers import eventually
from tests.runtime_support import Workers, start_task, worker_env
from tests.stack import Stack, running_stack

pytestmark = pytest.mark.slow

HEARTBEAT_S = 2  # the frozen worker's lease: short, so the test is quick
# The first POST is held this long by the upstream (its job already made): the frozen
# worker is inside it. Its own submit timeout is far longer, so its POST answers late.
SUBMIT_HELD_S = 5
# What the resumed worker logs of its stale attempt, whichever fence stops it: its first
# heartbeat finds the attempt gone and the SDK cancels it (Temporal's lease), or its result
# reaches the journal after the retry's and is dropped there (the call's key).
FENCES = {
    "its heartbeat found the attempt gone: cancelled, nothing stored": re.compile(
        r"Completing activity as failed .*'activity_type': 'run_tool', 'attempt': 1\b"
    ),
    "result dropped: the journal kept the retry's": re.compile(
        "an earlier-stored result stands; this attempt's is dropped"
    ),
}


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # several processes: slow
async def test_a_frozen_worker_is_fenced(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, in_process_worker=False
    ) as st:
        r = await st.sim.post(
            "/sim/faults",
            json={"submit_timeout_after_create": True, "submit_timeout_seconds": SUBMIT_HELD_S},
        )
        assert r.status_code == 200
        env = worker_env(
            tmp_path,
            db_url,
            temporal_server,
            task_queue,
            LOMO_MODEL_PROVIDER="offline",
            LOMO_EMBEDDER="fake",
            LOMO_SIM_URL=st.settings.resolved_sim_url,
            LOMO_API_URL=st.settings.resolved_api_url,
            LOMO_GENERATION_SUBMIT_TIMEOUT_SECONDS="120",
        )
        with Workers(env, tmp_path) as workers:
            procs = {"worker1": workers.spawn("worker1"), "worker2": workers.spawn("worker2")}
            await _polling(temporal_client, task_queue, len(procs))
            await _frozen_and_fenced(st, temporal_client, task_queue, procs, tmp_path)


async def _frozen_and_fenced(
    st: Stack,
    client: Client,
    task_queue: str,
    procs: dict[str, subprocess.Popen[bytes]],
    tmp: Path,
) -> None:
    t0 = time.time()
    timeline: list[tuple[float, str]] = []

    def mark(what: str, at: float | None = None) -> None:
        timeline.append(((at or time.time()) - t0, what))

    task_id, handle = await start_task(
        client,
        st.db,
        task_queue,
        st.user_id,
        "Generate an image of a red tabby cat",
        heartbeat_timeout_seconds=HEARTBEAT_S,
        generation_wait_seconds=2,
    )
    call_id = f"{task_id}:1:1:0"
    # The call is inside the upstream POST: the order is reserved and the job exists.
    await eventually(lambda: _jobs(st), within=60)
    pending = await eventually(lambda: _pending_call(handle), within=10)
    frozen_name = _by_identity(procs, pending["identity"])
    frozen, other = procs[frozen_name], procs[_other(procs, frozen_name)]
    os.kill(frozen.pid, signal.SIGSTOP)
    mark(f"SIGSTOP {frozen_name} (pid {frozen.pid}) in run_tool attempt {pending['attempt']}")
    assert await _entries(st) == [("deposit", 2000), ("reserve", 4)]

    # The server may hand the retry to the frozen worker's still-open polls first; each
    # such attempt times out and backs off (1, 2, 4 … 30 s), so the retry that lands on
    # the live worker can take minutes on a busy machine.
    retry = await eventually(lambda: _retried_elsewhere(handle, frozen.pid), within=240)
    mark(f"retry: attempt {retry['attempt']} started on pid {retry['pid']}", retry["at"])
    assert retry["pid"] == other.pid
    assert await handle.result() == "completed"
    mark("task completed (result presented)")
    before = await _snapshot(st, task_id, call_id)

    os.kill(frozen.pid, signal.SIGCONT)
    mark(f"SIGCONT {frozen_name}")
    log = tmp / f"{frozen_name}.log"
    at, fence = await eventually(lambda: _late_attempt(log), within=60)
    mark(f"late completion attempt by {frozen_name}: {fence}", at)
    # The state stays as it was before the worker woke, through a quiet spell of two
    # leases after its late attempt (a write still in flight in it would show).
    for _ in range(2 * HEARTBEAT_S * 4):
        assert await _snapshot(st, task_id, call_id) == before
        await asyncio.sleep(0.25)
    assert frozen.poll() is None, "the resumed worker keeps running"
    for at, what in await _refused(log):
        mark(f"{what} of {frozen_name} refused", at)

    snap = before
    assert snap["entries"] == [("deposit", 2000), ("reserve", 4), ("settle", 4)]
    assert len(snap["jobs"]) == 1 and len(snap["orders"]) == 1
    assert snap["orders"][0]["status"] == "succeeded" and snap["orders"][0]["object_id"]
    assert snap["call"]["status"] == "done"
    assert snap["steps"] == 1  # one inference: the decision was stored before the freeze
    replies = [e for e in snap["events"] if e[1] == "task.reply"]
    # What is being made (said with the plan), then the result, each once.
    assert [r[2].get("by") for r in replies] == [None, "runtime"]
    assert replies[1][2]["object_ids"] == [snap["orders"][0]["object_id"]]
    started = await _run_tool_started(handle)
    assert started["identity"].startswith(f"{other.pid}@") and started["attempt"] >= 2
    _report(timeline, started)


# --- what the test reads ------------------------------------------------------------------
async def _polling(client: Client, task_queue: str, n: int) -> None:
    """Both workers poll the queue before the task starts."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    async def ready() -> bool:
        got = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
        )
        return len({p.identity for p in got.pollers}) >= n

    await eventually(ready, within=120)


async def _jobs(st: Stack) -> list[dict[str, Any]] | None:
    jobs = list((await st.sim.get("/jobs")).json()["jobs"])
    return jobs or None


async def _pending_call(handle: WorkflowHandle[Any, Any]) -> dict[str, Any] | None:
    desc = await handle.describe()
    for a in desc.raw_description.pending_activities:
        if a.activity_type.name == "run_tool" and a.last_worker_identity:
            return {"identity": a.last_worker_identity, "attempt": a.attempt}
    return None


async def _retried_elsewhere(
    handle: WorkflowHandle[Any, Any], frozen: int
) -> dict[str, Any] | None:
    """The call's attempt that started on a worker other than the frozen one: pending, or
    (a retry that adopts the job it finds upstream can finish between two looks) the
    attempt the history recorded as started once the call completed."""
    desc = await handle.describe()
    for a in desc.raw_description.pending_activities:
        head = a.last_worker_identity.split("@")[0]
        pid = int(head) if head.isdigit() else 0
        if a.activity_type.name == "run_tool" and a.attempt >= 2 and pid and pid != frozen:
            at = a.last_started_time.ToDatetime().timestamp()
            return {"attempt": a.attempt, "pid": pid, "at": at}
    try:
        started = await _run_tool_started(handle)
    except AssertionError:
        return None  # not started again yet
    head = str(started["identity"]).split("@")[0]
    pid = int(head) if head.isdigit() else 0
    if started["attempt"] >= 2 and pid and pid != frozen:
        return {"attempt": started["attempt"], "pid": pid, "at": time.time()}
    return None


async def _run_tool_started(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """The history's record of the attempt whose completion the server took."""
    run_tool: set[int] = set()
    async for ev in handle.fetch_history_events():
        if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if ev.activity_task_scheduled_event_attributes.activity_type.name == "run_tool":
                run_tool.add(ev.event_id)
        if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = ev.activity_task_started_event_attributes
            if attrs.scheduled_event_id in run_tool:
                return {"identity": attrs.identity, "attempt": attrs.attempt}
    raise AssertionError("no run_tool start in the history")


async def _entries(st: Stack) -> list[tuple[str, int]]:
    async with st.db.session() as s:
        rows = await s.scalars(
            select(LedgerEntry).where(LedgerEntry.user_id == st.user_id).order_by(LedgerEntry.id)
        )
        return [(e.kind, e.amount_cents) for e in rows]


async def _snapshot(st: Stack, task_id: str, call_id: str) -> dict[str, Any]:
    """Everything a late attempt could touch: the ledger, orders, jobs, the call's
    journal, the task, its model steps, and the person's whole event log."""
    async with st.db.session() as s:
        orders = [
            _row(o)
            for o in await s.scalars(
                select(GenerationOrder).where(GenerationOrder.task_id == task_id)
            )
        ]
        call = await s.get(ToolCall, call_id, populate_existing=True)
        task = await s.get(Task, task_id, populate_existing=True)
        steps = list(await s.scalars(select(ModelStep.id).where(ModelStep.task_id == task_id)))
        events = [
            (e.seq, e.type, e.data)
            for e in await s.scalars(
                select(Event).where(Event.user_id == st.user_id).order_by(Event.seq)
            )
        ]
    assert call is not None and task is not None
    return {
        "entries": await _entries(st),
        "orders": orders,
        "jobs": (await st.sim.get("/jobs")).json()["jobs"],
        "call": _row(call),
        "task": _row(task),
        "steps": len(steps),
        "events": events,
    }


def _row(obj: Any) -> dict[str, Any]:
    return {c.key: getattr(obj, c.key) for c in obj.__table__.columns}


def _by_identity(procs: dict[str, subprocess.Popen[bytes]], identity: str) -> str:
    pid = int(identity.split("@")[0])
    return next(name for name, p in procs.items() if p.pid == pid)


def _other(procs: dict[str, subprocess.Popen[bytes]], name: str) -> str:
    return next(n for n in procs if n != name)


_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


async def _late_attempt(log: Path) -> tuple[float, str] | None:
    """When and how the resumed worker's stale attempt ended (its log's own time)."""
    lines = (await asyncio.to_thread(log.read_text, errors="replace")).splitlines()
    for line in lines:
        for fence, pattern in FENCES.items():
            if pattern.search(line) and (m := _STAMP.match(line)):
                local = time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
                return time.mktime(local) + int(m.group(2)) / 1000, fence
    return None


# The SDK core's own lines (UTC, RFC 3339) when the server refuses a stale completion.
_FENCED = re.compile(r"stale status ('\w+') refused \(fenced\)")
_CORE = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z.*?(Activity|Workflow task) not found")


async def _refused(log: Path) -> list[tuple[float, str]]:
    """What of the resumed worker was refused, as it logged it: stale completions (by the
    server) and stale status writes (by the status fence)."""
    text = await asyncio.to_thread(log.read_text, errors="replace")
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    found = []
    for m in _CORE.finditer(text):
        at = datetime.fromisoformat(m.group(1)).replace(tzinfo=UTC).timestamp()
        what = "activity completion" if m.group(2) == "Activity" else "workflow task completion"
        found.append((at, f"server: stale {what}"))
    for line in text.splitlines():
        if (m := _FENCED.search(line)) and (t := _STAMP.match(line)):
            local = time.strptime(t.group(1), "%Y-%m-%d %H:%M:%S")
            at = time.mktime(local) + int(t.group(2)) / 1000
            found.append((at, f"status fence: stale status {m.group(1)}"))
    return found


def _report(timeline: list[tuple[float, str]], started: dict[str, Any]) -> None:
    host = socket.gethostname()
    lines = [f"  t+{t:6.2f}s  {what}" for t, what in sorted(timeline)]
    lines.append(f"  history: run_tool completed by {started['identity'].replace(host, 'host')}")
    lines.append(f"           attempt {started['attempt']}")
    print("\nfrozen-worker timeline:\n" + "\n".join(lines))
    print(json.dumps({"timeline": [[round(t, 2), w] for t, w in sorted(timeline)]}))

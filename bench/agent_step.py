"""One agent step through the platform against a bare Temporal workflow, same run, same server.

    .venv/bin/python bench/agent_step.py [--steps 200] [--inferences 1|2|both]
                                            [--embedder usem|fake]

A step is: one message → one model step (a stub model) → one tool call (a stub tool) →
the reply. The platform side is a persistent `TaskWorkflow` on Postgres with the real
activities (`model_step` builds the context, retrieves memory, stores the decision and the
journal; `run_tool` journals the call; the stop-check reads the turn's state; status
changes are events): the message row is stored in its own transaction before the
update, as the api stores it (the api's request also checks the target and appends its
`message.received` and `message.routed` events in that transaction, which this bench
leaves out), the `message` update is sent as the api sends it, and the step ends when
the task's status event (`waiting_user`) is read from the event log by another process,
as the api's SSE stream reads it (`bench/step_watch.py`, woken by the bell the worker's
commits ring across processes, lomo/bell_relay.py; its CPU is counted in the Lomo row).
The bare
side is the least a Temporal user would write: an update whose handler waits until the
workflow ran the model activity and the tool activity, and returns the reply. A third side
is that workflow keeping the conversation in Postgres as a user who needs it durable would
(bench/bare_step.py): the message row stored before the update, the
decision and the tool's result stored by the activities, each committed; its ratio to the
bare step is what durability alone costs here, Lomo's ratio to it what the rest costs.

Memory retrieval embeds each step's query with the embedded default's model (usem, about
2.5 ms of CPU per new query here), and the person has memory: two preferences in the
profile and an instruction for this task, which each step's search finds and shows with
its source (`seed_memory`, through the memory pipeline's own extraction). The tests' hash
embedder (`--embedder fake`) costs nothing, and a person without memories reads none: either
would make the figures lighter than what `make up` runs.

With `--inferences 2` the model sees the tool's result and answers in a second model
step (the usual tool loop); the bare workflow then runs three activities.
Both workers run in this process, steps alternate platform/bare so both see the same load.
The watch runs in a process of its own, as the api's stream does: on the workers' event
loop its reads would take CPU from the worker's step.
After each platform step the bench waits until the task's workflow has taken in the step's
last activity before the bare step starts (not counted in either's time; its CPU is the
platform's): the step ends for the person when the status event is written, inside that
activity, and without the wait the workflow task that follows would run inside the bare
step. Then each side's step is followed by a quiet pause (`GAP_S`), so the server's
trailing work of one side does not land in the other's step either.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# As `lomo` sets it for its processes (cli/main.py), before numpy loads: with more BLAS
# threads than one, the memory embedder's threads spun for ~90 ms of CPU per step here.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import httpx
from psycopg_pool import AsyncConnectionPool
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from activities.memory import MemoryActivities
from activities.registry import build_activities
from bench.bare_step import JOURNAL_DDL, BareStep, JournalActivities, bare_model, bare_tool
from bench.support import HEADER, connect, dev_server, drop_pg, fresh_pg, machine, row
from cli.worker import make_worker
from llm.types import (
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from lomo.db.engine import Database
from lomo.db.migrate import upgrade
from lomo.db.models import MessageRow, Task
from lomo.events import bell_relay
from lomo.ids import new_id
from lomo.settings import Settings
from memory.types import ExtractInput
from standin.model import OfflineModel
from tests.runtime_support import add_message, new_user
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult
from workflows.task import TaskWorkflow
from workflows.types import TaskInput
from workspace.blobs import make_asset_store

WARMUP = 10
Embedders = Literal["usem", "fake"]
WATCH = Path(__file__).resolve().parent / "step_watch.py"
# A quiet pause after each side's step (counted in neither's time, in its CPU): the dev
# server's own work after a step (history, visibility for the search attributes) still ran
# inside the other side's next step, which measured 49 ms p50 for the bare step with the
# pause and 59–92 ms without it.
GAP_S = 0.1


class StubTool(Tool):
    spec = ToolSpec("lookup", "Look a fact up (bench stub).", {"type": "object", "properties": {}})

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        return ToolResult("done", {"answer": "42"})


class StubModel:
    """Answers a task step with the tool call (and, with one inference, the reply too)."""

    name = "stub"

    def __init__(self, inferences: int) -> None:
        self.inferences = inferences

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.purpose != "task_step":
            return await OfflineModel().complete(request)
        usage = Usage(input_tokens=10, output_tokens=5)
        last = request.messages[-1].content if request.messages else []
        if self.inferences == 2 and any(isinstance(b, ToolResultBlock) for b in last):
            return ModelResponse([TextBlock("The answer is 42.")], "end_turn", usage)
        use = ToolUseBlock(id=new_id("tu"), name="lookup", input={})
        if self.inferences == 1:
            # The reply and the call in one response; the turn ends after the call.
            return ModelResponse([TextBlock("Looking it up: 42."), use], "end_turn", usage)
        return ModelResponse([use], "tool_use", usage)


# --- drivers ---------------------------------------------------------------------------
@dataclass
class Platform:
    db: Database
    handle: WorkflowHandle[Any, Any]
    user_id: str
    task_id: str
    # The person's side in its own process (bench/step_watch.py): one line per
    # `waiting_user` status event it read.
    watch: asyncio.subprocess.Process
    seq: int = 0
    watch_cpu: float = 0.0  # the watch's CPU seconds at its last line
    last_message: str = ""
    times: list[float] = field(default_factory=list)

    async def step(self, n: int, text: str = "") -> tuple[float, float]:
        """The step's time (ms) and the watch process's CPU for it (ms)."""
        t0 = time.perf_counter()
        mid = await add_message(self.db, self.user_id, self.task_id, text or f"look up {n}")
        self.last_message = mid
        await self.handle.execute_update("message", mid)
        assert self.watch.stdout is not None
        while True:
            line = await self.watch.stdout.readline()
            if not line:
                raise RuntimeError("the watch process ended")
            seq, seen, cpu = line.split()
            if int(seq) > self.seq:
                self.seq = int(seq)
                used, self.watch_cpu = (float(cpu) - self.watch_cpu) * 1000, float(cpu)
                return (float(seen) - t0) * 1000, used

    async def settle(self) -> None:
        """Wait until the workflow has taken in the step's last activity. The person saw the
        step end already (the status event is written inside that activity), but the
        workflow task that follows is still the platform's work: run inside the bare side's
        next step, it would slow that step down and flatter the ratio."""
        while True:
            d = (await self.handle.describe()).raw_description
            if not d.pending_activities and not d.HasField("pending_workflow_task"):
                return
            await asyncio.sleep(0.005)


async def start_platform(
    client: Client, db: Database, queue: str, pg: str, bell_dir: Path
) -> Platform:
    user = await new_user(db)
    task_id = new_id("tsk")
    async with db.session() as s:
        s.add(Task(id=task_id, user_id=user, kind="persistent", status="running", goal="bench"))
    handle = await client.start_workflow(
        TaskWorkflow.run,
        TaskInput(task_id, user, "persistent", None),
        id=f"task:{task_id}",
        task_queue=queue,
    )
    watch = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WATCH),
        pg,
        str(bell_dir),
        user,
        stdout=asyncio.subprocess.PIPE,
    )
    assert watch.stdout is not None
    if (await watch.stdout.readline()).strip() != b"ready":
        raise RuntimeError("the watch process did not start")
    return Platform(db, handle, user, task_id, watch)


# What the person said before: two preferences (main thread, into the profile) and an
# instruction for this task (said in its first step), extracted by the memory pipeline's
# own activity. Each step's search then finds the instruction and shows it with its source.
PROFILE_SAYS = ("Our brand's main colour is blue.", "I usually prefer low-saturation palettes.")
TASK_SAYS = "Let's try a saturated red this time."


async def seed_memory(
    plat: Platform, settings: Settings, http: httpx.AsyncClient, provider: StubModel
) -> None:
    """Give the person a memory, so each step's retrieval reads memories as it would for
    anyone who has used Lomo a while."""
    deps = ToolDeps(db=plat.db, http=http, assets=make_asset_store(settings), settings=settings)
    memory = MemoryActivities(deps, provider)
    for text in PROFILE_SAYS:
        mid = new_id("msg")
        async with plat.db.session() as s:
            s.add(MessageRow(id=mid, user_id=plat.user_id, text=text))
        await memory.extract(ExtractInput(plat.user_id, mid))
    await plat.step(0, TASK_SAYS)
    await memory.extract(ExtractInput(plat.user_id, plat.last_message))


async def _all_runs(client: Client, handle: WorkflowHandle[Any, Any]) -> list[Any]:
    """Every run's history events: a long task continues as new, and the first run's
    history alone would count only the steps before that."""
    query = f"WorkflowId = '{handle.id}'"
    runs: list[str | None] = [w.run_id async for w in client.list_workflows(query)]
    out: list[Any] = []
    for run_id in runs or [handle.run_id]:
        h = client.get_workflow_handle(handle.id, run_id=run_id)
        out.extend([e async for e in h.fetch_history_events()])
    return out


async def activity_profile(client: Client, handle: WorkflowHandle[Any, Any], steps: int) -> str:
    """Activities per step and their mean run time (started → completed, server clock),
    over every run of the workflow."""
    names: Counter[str] = Counter()
    took: Counter[str] = Counter()
    scheduled: dict[int, str] = {}
    started: dict[int, float] = {}
    local = events = 0
    for e in await _all_runs(client, handle):
        events += 1
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            scheduled.clear()  # event ids start again in each run
            started.clear()
        t = e.event_time.ToMilliseconds()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
            names[scheduled[e.event_id]] += 1
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started[e.activity_task_started_event_attributes.scheduled_event_id] = t
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            sid = e.activity_task_completed_event_attributes.scheduled_event_id
            took[scheduled[sid]] += t - started.get(sid, t)
        elif e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            local += 1
    per = ", ".join(f"{k} {v / steps:.1f} ({took[k] / v:.0f} ms)" for k, v in sorted(names.items()))
    return f"{events / steps:.1f} events/step; activities/step: {per}; markers {local / steps:.1f}"


async def print_timeline(handle: WorkflowHandle[Any, Any]) -> None:
    """The last step's history events, ms after the step's first event (where time goes)."""
    events = [e async for e in handle.fetch_history_events()]
    start = max(
        i
        for i, e in enumerate(events)
        if e.event_type
        in (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED,
        )
    )
    t0 = events[start - 3].event_time.ToMilliseconds()
    for e in events[start - 3 :]:
        ms = e.event_time.ToMilliseconds() - t0
        sys.stderr.write(f"{ms:6d} ms  {EventType.Name(e.event_type)[11:]}\n")
    sys.stderr.write("\n")


async def run(
    steps: int,
    inferences: int,
    tmp: Path,
    address: str,
    timeline: bool = False,
    gap: float = GAP_S,
    embedder: Embedders = "usem",
) -> list[str]:
    pg_url, db_url = fresh_pg()
    upgrade(db_url)
    settings = Settings(
        data_dir=tmp / f"data{inferences}",
        database_url=db_url,
        temporal_address=address,
        task_queue=f"platform-{inferences}",
        embedder=embedder,
        model_provider="offline",
    )
    # The worker's commits of events wake the watch process, as they wake the api's streams.
    db = Database(db_url, relay=bell_relay(settings.bell_dir))
    client = await connect(address)
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        pg_url, min_size=2, kwargs={"autocommit": True}, open=False
    )
    await pool.open()
    async with pool.connection() as c:
        await c.execute(JOURNAL_DDL)
    journal = JournalActivities(pool)
    async with httpx.AsyncClient() as http:
        model = StubModel(inferences)
        acts = build_activities(settings, db, http, model, extra_tools=[StubTool()])
        platform_worker = make_worker(client, settings, acts)
        bare_worker = Worker(
            client,
            task_queue=f"bare-{inferences}",
            workflows=[BareStep],
            activities=[bare_model, bare_tool, journal.model, journal.tool],
        )
        async with platform_worker, bare_worker:
            plat = await start_platform(client, db, settings.task_queue, pg_url, settings.bell_dir)
            await seed_memory(plat, settings, http, model)
            await plat.settle()
            bare = await client.start_workflow(
                BareStep.run, inferences, id=new_id("bare"), task_queue=f"bare-{inferences}"
            )
            journaled = await client.start_workflow(
                BareStep.run,
                args=[inferences, True],
                id=new_id("bare"),
                task_queue=f"bare-{inferences}",
            )
            bare_times: list[float] = []
            journal_times: list[float] = []
            # CPU of this process (driver and both workers) per step: what the step costs
            # here, whatever else the shared machine runs meanwhile.
            cpu = {"lomo": 0.0, "bare": 0.0, "journal": 0.0}
            for n in range(WARMUP + steps):
                c0 = time.process_time()
                ms, watch_ms = await plat.step(n)
                await plat.settle()  # its CPU is the platform's; its time is not the step's
                await asyncio.sleep(gap)
                c1 = time.process_time()
                t0 = time.perf_counter()
                await bare.execute_update(BareStep.message, f"look up {n}")
                bare_ms = (time.perf_counter() - t0) * 1000
                await asyncio.sleep(gap)
                c2 = time.process_time()
                t0 = time.perf_counter()
                key = new_id("msg")
                await journal.store_message(key, f"look up {n}")
                await journaled.execute_update(BareStep.message, key)
                journal_ms = (time.perf_counter() - t0) * 1000
                await asyncio.sleep(gap)
                if n >= WARMUP:
                    plat.times.append(ms)
                    bare_times.append(bare_ms)
                    journal_times.append(journal_ms)
                    cpu["lomo"] += ((c1 - c0) * 1000 + watch_ms) / steps
                    cpu["bare"] += (c2 - c1) * 1000 / steps
                    cpu["journal"] += (time.process_time() - c2) * 1000 / steps
            prof = await activity_profile(client, plat.handle, WARMUP + steps)
            if timeline:
                await print_timeline(plat.handle)
                await print_timeline(bare)
            bare_prof = await activity_profile(client, bare, WARMUP + steps)
            journal_prof = await activity_profile(client, journaled, WARMUP + steps)
    await pool.close()
    plat.watch.terminate()
    await plat.watch.wait()
    await db.dispose()
    drop_pg(pg_url)
    ratio50 = _p(plat.times, 50) / _p(bare_times, 50)
    ratio99 = _p(plat.times, 99) / _p(bare_times, 99)
    label = f"{inferences} inference{'s' if inferences > 1 else ''}"
    if embedder != "usem":
        label += f", {embedder} embedder"
    # Does a step cost more the longer the task is? p50 of the first and the last fifth.
    fifth = max(1, len(plat.times) // 5)

    def growth(times: list[float]) -> str:
        first, last = _p(times[:fifth], 50), _p(times[-fifth:], 50)
        return f"p50 steps 1–{fifth}: {first:.0f} ms, last {fifth}: {last:.0f} ms"

    plat_note = f"CPU {cpu['lomo']:.0f} ms/step; {growth(plat.times)}; {prof}"
    bare_note = f"CPU {cpu['bare']:.0f} ms/step; {growth(bare_times)}; {bare_prof}"
    journal_note = f"CPU {cpu['journal']:.0f} ms/step; {growth(journal_times)}; {journal_prof}"

    def ratio(a: list[float], b: list[float]) -> str:
        return f"{_p(a, 50) / _p(b, 50):.2f}× | {_p(a, 99) / _p(b, 99):.2f}×"

    return [
        row(f"Lomo, {label}", plat.times, plat_note),
        row(f"bare Temporal, {label}", bare_times, bare_note),
        row(f"bare Temporal + Postgres journal, {label}", journal_times, journal_note),
        f"| ratio Lomo / bare, {label} | | {ratio50:.2f}× | {ratio99:.2f}× | | target ≤ 1.3× |",
        f"| ratio journal / bare, {label} | | {ratio(journal_times, bare_times)} | | "
        "what durability alone costs |",
        f"| ratio Lomo / journal, {label} | | {ratio(plat.times, journal_times)} | | "
        "what the rest of Lomo costs |",
    ]


def _p(xs: list[float], p: float) -> float:
    from bench.support import pct

    return pct(xs, p)


async def main(steps: int, which: str, timeline: bool, embedder: Embedders = "usem") -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lomo-step-"))
    server, address = dev_server(tmp)
    lines = [HEADER]
    try:
        for inferences in (1, 2) if which == "both" else (int(which),):
            lines += await run(steps, inferences, tmp, address, timeline, embedder=embedder)
    finally:
        server.terminate()
        server.wait(timeout=15)
    sys.stdout.write("\n".join([*lines, f"machine: {machine()}"]) + "\n")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--inferences", default="both", choices=["1", "2", "both"])
    p.add_argument("--timeline", action="store_true", help="the last step's events (stderr)")
    p.add_argument(
        "--embedder",
        default="usem",
        choices=get_args(Embedders),
        help="memory's embedder: the embedded default (usem) or the tests' hash (fake)",
    )
    a = p.parse_args()
    asyncio.run(main(a.steps, a.inferences, a.timeline, a.embedder))

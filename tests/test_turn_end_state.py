"""The facts the stop-check needs at a turn's end come from the activity that ended the
turn (no separate read per turn), and they are the facts after that activity ran: a
checkpoint the turn's one call created is asked about at once. The workflow alone decides
how the turn ends and writes the status it decided: the activities only report facts, so
a message that arrived while the last step ran simply starts the next turn.

A step with parallel calls has no single last call: the turn's end reads the facts with
the `turn_state` activity. Every history here is replayed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select, update
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import ActivityEnvironment

from activities.registry import build_activities
from activities.types import StatusInput, StepInput
from llm.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock, Usage
from lomo.db.models import Card, Event, MessageRow, Task
from lomo.ids import new_id
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import add_message, replay_and_maybe_record, start_task, text
from tests.stack import Stack, running_stack

UNSCRIPTED = ("extract", "summarize", "summarize_episode", "route")
PLAN = {"add": [{"title": "Pick one", "requires_confirmation": True}]}


def _calls_then_end(*calls: tuple[str, dict[str, Any]]) -> ModelResponse:
    """A reply and the calls in one response that ends the turn."""
    uses = [ToolUseBlock(id=f"toolu_{i}", name=n, input=a) for i, (n, a) in enumerate(calls)]
    return ModelResponse([TextBlock("On it."), *uses], "end_turn", Usage(10, 5))


class _Gate:
    """A model answer held until the test releases it: the turn's last step is running."""

    def __init__(self, reply: ModelResponse) -> None:
        self.reply = reply
        self.entered, self.release = asyncio.Event(), asyncio.Event()

    async def answer(self, request: ModelRequest) -> ModelResponse:
        self.entered.set()
        await self.release.wait()
        return self.reply


_WFT = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
}


async def _activity_runs(handle: WorkflowHandle[Any, Any], name: str) -> int:
    """How often the workflow ran activity `name` (a local one leaves a marker naming it).
    The query sees a status as soon as the workflow sets it, which is before the local
    activity that writes it has run: count once the workflow task in flight completed."""

    async def settled() -> list[Any] | None:
        events = [e async for e in handle.fetch_history_events()]
        tasks = [e.event_type for e in events if e.event_type in _WFT]
        return events if tasks[-1] == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED else None

    n = 0
    quoted = f'"{name}"'.encode()
    for e in await eventually(settled, within=30):
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            details = e.marker_recorded_event_attributes.details
            n += any(quoted in p.data for v in details.values() for p in v.payloads)
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = e.activity_task_scheduled_event_attributes
            n += attrs.activity_type.name == name
    return n


async def _waiting(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    async def settled() -> Any:
        state: dict[str, Any] = await handle.query("state")
        return state if state["status"] == "waiting_user" else None

    result: dict[str, Any] = await eventually(settled, within=60)
    return result


async def _checkpoint_cards(st: Stack, task_id: str) -> list[Card]:
    async with st.db.session() as s:
        cards = await s.scalars(select(Card).where(Card.task_id == task_id))
        return [c for c in cards if (c.payload or {}).get("by") == "runtime"]


async def _run(
    tmp: Path,
    db_url: str,
    server: str,
    client: Client,
    queue: str,
    answer: ModelResponse,
    name: str,
) -> tuple[list[Card], int]:
    provider = ScriptedProvider([answer] + [text("Noted.")] * 5, unscripted=UNSCRIPTED)
    async with running_stack(tmp, db_url, server, client, queue, provider=provider) as st:
        tid, handle = await start_task(
            client, st.db, queue, st.user_id, "Posters", kind="persistent"
        )
        await _waiting(handle)
        cards = await _checkpoint_cards(st, tid)
        runs = await _activity_runs(handle, "turn_state")
        await replay_and_maybe_record(client, handle.id, name)
    return cards, runs


async def test_a_turn_ending_in_one_call_uses_the_calls_state(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    cards, runs = await _run(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        _calls_then_end(("update_checklist", PLAN)),
        "turn_end_state_one_call",
    )
    # The checkpoint exists only after the call ran: the state was read after it.
    assert len(cards) == 1 and cards[0].status == "open"
    assert runs == 0


async def test_a_turn_ending_without_a_call_uses_the_model_steps_state(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    cards, runs = await _run(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        text("Which size?"),
        "turn_end_state_no_call",
    )
    assert cards == [] and runs == 0


async def test_parallel_calls_read_the_state_after_all_of_them(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    note = {"name": "Sizes", "text": "A3 and A2"}
    cards, runs = await _run(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        _calls_then_end(("update_checklist", PLAN), ("create_document", note)),
        "turn_end_state_parallel",
    )
    assert len(cards) == 1 and cards[0].status == "open"
    assert runs == 1


async def test_the_turns_running_status_is_written_by_its_first_step(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    provider = ScriptedProvider([text("Which size?"), text("A3 then.")], unscripted=UNSCRIPTED)
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "Posters", kind="persistent"
        )
        await _waiting(handle)
        mid = await add_message(st.db, st.user_id, tid, "A3")
        await handle.execute_update("message", mid)
        await eventually(lambda: _statuses(st, tid, 3), within=60)
        # waiting (turn 1), then running and waiting (turn 2): the person sees the turn run
        assert await _statuses(st, tid, 3) == ["waiting_user", "running", "waiting_user"]
        # The start rode on the turn's first step; each end the workflow wrote itself.
        assert await _activity_runs(handle, "set_task_status") == 2
        await replay_and_maybe_record(temporal_client, handle.id, "turn_running_in_step")


async def test_a_turn_ending_in_one_call_is_ended_by_the_workflow(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    note = {"name": "Sizes", "text": "A3 and A2"}
    provider = ScriptedProvider([_calls_then_end(("create_document", note))], unscripted=UNSCRIPTED)
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "Posters", kind="persistent"
        )
        await _waiting(handle)
        await eventually(lambda: _statuses(st, tid, 1), within=60)
        assert await _statuses(st, tid, 1) == ["waiting_user"]
        assert await _activity_runs(handle, "set_task_status") == 1
        await replay_and_maybe_record(temporal_client, handle.id, "turn_end_status_in_call")


async def test_a_message_arriving_while_the_last_step_runs_starts_the_next_turn(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """A message arrives while the step that ends turn 1 runs: the workflow's verdict is
    the next turn, which reads the message; the person never sees the task wait between
    the two turns."""
    gate = _Gate(text("Which size?"))
    provider = ScriptedProvider([gate.answer, text("A3 then.")], unscripted=UNSCRIPTED)
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "Posters", kind="persistent"
        )
        await asyncio.wait_for(gate.entered.wait(), 60)
        mid = await add_message(st.db, st.user_id, tid, "A3")
        await handle.execute_update("message", mid)
        gate.release.set()
        state = await _waiting(handle)
        await eventually(lambda: _statuses(st, tid, 1), within=60)
        assert await _statuses(st, tid, 1) == ["waiting_user"]  # only after turn 2
        assert state["turn"] == 2
        async with st.db.session() as s:
            seen = await s.scalar(select(MessageRow.processed_turn).where(MessageRow.id == mid))
        assert seen == 2
        assert await _activity_runs(handle, "set_task_status") == 1
        await replay_and_maybe_record(temporal_client, handle.id, "turn_end_status_overtaken")


async def _statuses(st: Stack, task_id: str, n: int) -> list[str] | None:
    async with st.db.session() as s:
        rows = await s.scalars(select(Event).where(Event.type == "task.status").order_by(Event.seq))
        got = [e.data["status"] for e in rows if e.data.get("task_id") == task_id]
    return got if len(got) >= n else None


async def test_a_promotion_during_the_ending_step_keeps_the_persistent_kind(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """The person promotes a lightweight task while its last step runs: the status that
    step writes does not take the kind back, and the workflow writes the new kind."""
    gate = _Gate(text("Which size?"))
    provider = ScriptedProvider([gate.answer], unscripted=UNSCRIPTED)
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(temporal_client, st.db, task_queue, st.user_id, "Sizes?")
        await asyncio.wait_for(gate.entered.wait(), 60)
        r = await st.api.post(f"/v1/tasks/{tid}/promote", headers=st.auth)
        assert r.status_code == 200, r.text
        gate.release.set()
        state = await _waiting(handle)
        assert state["kind"] == "persistent"
        task = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
        assert (task["kind"], task["status"]) == ("persistent", "waiting_user")
        # The kind changed after the snapshot: the workflow wrote the status with it.
        assert await _activity_runs(handle, "set_task_status") == 1
        await replay_and_maybe_record(temporal_client, handle.id, "turn_end_promoted")


async def test_a_retried_step_or_a_stale_attempt_writes_no_status(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """A model step retried after it stored its decision does not write its turn's
    "running" again (the log would flicker), and a status attempt that outlived its turn
    does not write "waiting_user" over the next one."""
    provider = ScriptedProvider([text("Which size?")] * 2, unscripted=UNSCRIPTED)
    async with (
        running_stack(
            tmp_path, db_url, temporal_server, temporal_client, task_queue, in_process_worker=False
        ) as st,
        httpx.AsyncClient() as http,
    ):
        acts = {
            getattr(a, "__name__", ""): a
            for a in build_activities(st.settings, st.db, http, provider)
        }
        tid = new_id("tsk")
        async with st.db.session() as s:
            s.add(Task(id=tid, user_id=st.user_id, kind="persistent", status="waiting_user"))
        mid = await add_message(st.db, st.user_id, tid, "A3")
        running = StatusInput(tid, "running", "", "persistent")
        step = StepInput(tid, 1, 1, [mid], st.user_id, running)
        env = ActivityEnvironment()
        first = await env.run(acts["model_step"], step)
        again = await env.run(acts["model_step"], step)  # the retry of a stored step
        assert first == again and first.turn_state is not None
        await env.run(acts["set_task_status"], StatusInput(tid, "waiting_user", only_at_turn=1))
        assert await _statuses(st, tid, 1) == ["running", "waiting_user"]
        # Turn 2 runs; an attempt of turn 1's ending activity wakes up late.
        await env.run(acts["set_task_status"], StatusInput(tid, "running", only_before_turn=2))
        async with st.db.session() as s:
            await s.execute(update(Task).where(Task.id == tid).values(turn=2))
        await env.run(acts["set_task_status"], StatusInput(tid, "waiting_user", only_at_turn=1))
        got = await _statuses(st, tid, 1)
        assert got == ["running", "waiting_user", "running"]

"""The step's storage, one conformance suite for both backends (SQLite and Postgres): what
a step loads, what its commit writes and refuses, status changes with their events, and
the tool-call journal. Each test runs on both; the Postgres backend's batches are also
counted (one round trip each)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from context.segments import ContextPolicy
from journal.backend import Batch
from journal.store import StepStore
from journal.types import (
    CallResult,
    PlannedCallRow,
    StatusChange,
    StepQuery,
    StepRecord,
)
from lomo import clock
from lomo.db.context import ToolOutput
from lomo.db.engine import Database
from lomo.db.models import Card, ChecklistItem, Event, MessageRow, ModelStep, Task, ToolCall
from lomo.db.query import Query, Rows
from lomo.events import BELL
from tests.runtime_support import add_message, new_user

POLICY = ContextPolicy(segment_steps=4, recent_steps=2)


class _Counted:
    """The store's backend, counting the batches (round trips on Postgres) it sends."""

    def __init__(self, real: Any) -> None:
        self.real, self.batches = real, 0

    def _wrap(self, batch: Batch) -> Batch:
        async def counted(*queries: Query, commit: bool = False) -> list[Rows]:
            self.batches += 1
            return await batch(*queries, commit=commit)

        return counted

    @asynccontextmanager
    async def reads(self) -> AsyncIterator[Batch]:
        async with self.real.reads() as batch:
            yield self._wrap(batch)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Batch]:
        async with self.real.transaction() as batch:
            yield self._wrap(batch)


async def _task(db: Database, user: str, status: str = "waiting_user") -> str:
    task_id = f"tsk_{user[-8:]}"
    async with db.session() as s:
        s.add(Task(id=task_id, user_id=user, kind="persistent", status=status, goal="posters"))
    return task_id


def _record(task_id: str, user: str, step: int, mids: list[str], **kw: Any) -> StepRecord:
    uses = kw.pop("uses", [])
    return StepRecord(
        task_id=task_id,
        user_id=user,
        turn=1,
        step=step,
        at=clock.now() + timedelta(seconds=step),
        context={"prefix": {"domains": ["image"]}, "layers": []},
        response={"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"},
        message_ids=mids,
        calls=[
            PlannedCallRow(f"{task_id}:1:{step}:{i}", f"toolu_{step}_{i}", name, {"n": i})
            for i, name in enumerate(uses)
        ],
        **kw,
    )


async def _events(db: Database, user: str) -> list[tuple[int, str, dict[str, Any]]]:
    async with db.session() as s:
        rows = await s.execute(
            select(Event.seq, Event.type, Event.data)
            .where(Event.user_id == user)
            .order_by(Event.seq)
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]


async def test_a_step_loads_its_task_and_commits_its_record_once(db: Database) -> None:
    user = await new_user(db)
    task_id = await _task(db, user)
    mid = await add_message(db, user, task_id, "Three posters, please.")
    store = StepStore(db, POLICY)
    counted = store.backend = _Counted(store.backend)  # type: ignore[assignment]
    loaded = await store.load_step(StepQuery(task_id, user, 1, 1, [mid]))
    assert loaded.stored is None and counted.batches == 2
    assert loaded.data.said == ["Three posters, please."] and loaded.data.steps == []
    assert loaded.data.task.turn == 1 and list(loaded.data.messages) == [mid]
    running = StatusChange(task_id, "running", kind="persistent", only_before_turn=1)
    record = _record(task_id, user, 1, [mid], uses=["update_checklist"], reply="On it.")
    record.running = running
    counted.batches = 0
    assert await store.commit_step(record) is None
    if db.engine.dialect.name == "postgresql":
        assert counted.batches == 1  # the status and the step's writes in one round trip
    # The status and then the reply, each an event of the person's, in that order.
    events = await _events(db, user)
    assert [(seq, t) for seq, t, _ in events] == [(1, "task.status"), (2, "task.reply")]
    assert events[1][2] == {"task_id": task_id, "text": "On it.", "turn": 1, "step": 1}
    # The same step again: refused whole (the step's unique key), nothing added.
    with pytest.raises(IntegrityError):
        await store.commit_step(_record(task_id, user, 1, [mid], uses=["x", "y"], reply="Again"))
    async with db.session() as s:
        calls = list(await s.scalars(select(ToolCall.call_id)))
        msg = await s.get(MessageRow, mid)
        task = await s.get(Task, task_id)
    assert calls == [f"{task_id}:1:1:0"] and len(await _events(db, user)) == 2
    assert msg is not None and (msg.processed_turn, msg.processed_step) == (1, 1)
    assert task is not None and (task.status, task.turn) == ("running", 1)
    # Loading the step again answers from its stored decision.
    again = await store.load_step(StepQuery(task_id, user, 1, 1, [mid]))
    assert again.stored == (record.response, 1)


async def test_the_next_step_sees_the_history_and_the_turns_facts(db: Database) -> None:
    user = await new_user(db)
    task_id = await _task(db, user)
    mid = await add_message(db, user, task_id, "Go.")
    store = StepStore(db, POLICY)
    await store.commit_step(_record(task_id, user, 1, [mid], uses=["load_tools"]))
    async with db.session() as s:
        s.add(ChecklistItem(id="itm_a", task_id=task_id, position=0, title="Drafts"))
        s.add(Card(id="crd_a", user_id=user, task_id=task_id, kind="select", title="Pick"))
    facts = await store.commit_step(_record(task_id, user, 2, [], turn_facts=True))
    assert facts is not None and facts.open_cards == ["crd_a"] and facts.checklist_open == 1
    assert facts == await store.turn_facts(task_id, 1)
    loaded = await store.load_step(StepQuery(task_id, user, 2, 1, []))
    data = loaded.data
    assert [(s.turn, s.step) for s in data.steps] == [(1, 1), (1, 2)]
    assert all(s.response is not None for s in data.steps)  # both shown in full
    assert [c.call_id for c in data.calls] == [f"{task_id}:1:1:0"]
    assert data.prev_prefix == {"domains": ["image"]} and data.items[0].id == "itm_a"
    assert list(data.messages) == [mid] and data.cards[0].status == "open"


async def test_another_persons_task_is_refused(db: Database) -> None:
    owner, stranger = await new_user(db), await new_user(db)
    task_id = await _task(db, owner)
    store = StepStore(db, POLICY)
    with pytest.raises(PermissionError):
        await store.load_step(StepQuery(task_id, stranger, 1, 1, []))
    with pytest.raises(LookupError):
        await store.load_step(StepQuery("tsk_none", stranger, 1, 1, []))


async def test_a_status_change_writes_its_event_once(db: Database) -> None:
    user = await new_user(db)
    task_id = await _task(db, user, status="running")
    store = StepStore(db, POLICY)
    waiting = StatusChange(task_id, "waiting_user")
    bell = BELL.waiter(user)
    try:
        assert await store.write_status(waiting, clock.now())
        await asyncio.wait_for(bell.wait(), 5)  # the person's streams are woken
    finally:
        BELL.forget(user, bell)
    assert not await store.write_status(waiting, clock.now())  # unchanged: no event
    # Guarded by the task's turn: a stale attempt's status changes nothing.
    stale = StatusChange(task_id, "running", only_at_turn=7)
    assert not await store.write_status(stale, clock.now())
    promoted = StatusChange(task_id, "waiting_user", kind="lightweight")
    assert not await store.write_status(promoted, clock.now())  # the kind all the same
    with pytest.raises(LookupError):
        await store.write_status(StatusChange("tsk_none", "running"), clock.now())
    async with db.session() as s:
        s.add(Card(id="crd_b", user_id=user, task_id=task_id, kind="confirm", title="Ok?"))
    assert await store.write_status(StatusChange(task_id, "stopped", "by you"), clock.now())
    async with db.session() as s:
        task = await s.get(Task, task_id)
        card = await s.get(Card, "crd_b")
    assert task is not None and (task.status, task.kind) == ("stopped", "lightweight")
    assert card is not None and card.status == "expired"
    statuses = [d["status"] for _, t, d in await _events(db, user) if t == "task.status"]
    assert statuses == ["waiting_user", "stopped"]


async def test_a_call_is_journaled_once_under_its_id(db: Database) -> None:
    user = await new_user(db)
    task_id = await _task(db, user)
    store = StepStore(db, POLICY)
    await store.commit_step(_record(task_id, user, 1, [], uses=["generate_image"]))
    call_id = f"{task_id}:1:1:0"
    assert await store.open_call("tsk_x:1:1:0", True, clock.now()) is None
    opened = await store.open_call(call_id, True, clock.now())
    assert opened is not None and (opened.status, opened.name) == ("planned", "generate_image")
    assert opened.user_id == user and opened.seen_domains == ["image"]
    # A retry finds the mark the first attempt left: it may have acted.
    retried = await store.open_call(call_id, True, clock.now())
    assert retried is not None and retried.status == "started"
    big = "x" * 50
    first = CallResult(task_id, user, call_id, "done", {"ok": 1}, clock.now(), big, "out_1", 1)
    stored, facts = await store.finish_call(first)
    assert stored and facts is not None and facts.checklist_total == 0
    # A second attempt's result is dropped: the journal keeps the first, and its output.
    second = CallResult(task_id, user, call_id, "done", {"ok": 2}, clock.now(), "y", "out_1")
    assert await store.finish_call(second) == (False, None)
    again = await store.open_call(call_id, True, clock.now())
    assert again is not None and (again.status, again.result) == ("done", {"ok": 1})
    async with db.session() as s:
        outputs = list(await s.scalars(select(ToolOutput.content)))
        n = await s.scalar(select(func.count()).select_from(ModelStep))
    assert outputs == [big] and n == 1

"""`write_status` and the call's `started` mark (activities/runtime_db.py), on SQLite and
on Postgres, where the status UPDATE and its event are one statement: a change appends
exactly one `task.status` event and wakes the person's streams on commit; no change, a turn
guard that does not hold, or a kind-only change appends none; a terminal status expires
open cards; no task is an error."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import bindparam, select
from temporalio.exceptions import ApplicationError

from activities.types import StatusInput
from journal.statements import (
    CALL_RESULT,
    LOCK_CALL,
    PLAN_CALL,
    START_CALL,
    status_batch,
    write_status,
)
from lomo import clock
from lomo.cards import create_card
from lomo.db.engine import Database
from lomo.db.hot import HotQuery, execute_all, prefetched
from lomo.db.models import Card, Event, Task, ToolCall
from lomo.events import BELL, append_event, event_batch
from lomo.ids import new_id
from tests.runtime_support import new_user


async def _task(db: Database) -> tuple[str, str]:
    user = await new_user(db)
    task_id = new_id("tsk")
    async with db.session() as s:
        s.add(Task(id=task_id, user_id=user, kind="oneoff", status="running", goal="g", turn=2))
    return user, task_id


async def _status_events(db: Database, user: str) -> list[dict[str, object]]:
    async with db.session() as s:
        rows = await s.scalars(
            select(Event)
            .where(Event.user_id == user, Event.type == "task.status")
            .order_by(Event.seq)
        )
        return [e.data for e in rows]


async def test_a_change_appends_one_event_and_rings_on_commit(db: Database) -> None:
    user, task_id = await _task(db)
    ev = BELL.waiter(user)
    try:
        async with db.session() as s:
            await write_status(s, StatusInput(task_id, "waiting_user", reason="asked"))
            assert not ev.is_set()  # not before the commit
        await asyncio.wait_for(ev.wait(), 5)
    finally:
        BELL.forget(user, ev)
    assert await _status_events(db, user) == [
        {"task_id": task_id, "status": "waiting_user", "reason": "asked"}
    ]
    async with db.session() as s:
        task = await s.get(Task, task_id)
        assert task is not None and (task.status, task.status_reason) == ("waiting_user", "asked")


async def test_no_change_and_a_failed_guard_append_nothing(db: Database) -> None:
    user, task_id = await _task(db)
    async with db.session() as s:
        await write_status(s, StatusInput(task_id, "running"))  # unchanged
        await write_status(s, StatusInput(task_id, "waiting_user", only_before_turn=2))
        await write_status(s, StatusInput(task_id, "waiting_user", only_at_turn=3))
        await write_status(s, StatusInput(task_id, "running", kind="persistent"))
    assert await _status_events(db, user) == []
    async with db.session() as s:
        task = await s.get(Task, task_id)
        assert task is not None and (task.status, task.kind) == ("running", "persistent")
    async with db.session() as s:
        await write_status(s, StatusInput(task_id, "waiting_user", only_at_turn=2))
    assert [e["status"] for e in await _status_events(db, user)] == ["waiting_user"]


async def test_a_terminal_status_expires_open_cards(db: Database) -> None:
    user, task_id = await _task(db)
    async with db.session() as s:
        card = await create_card(
            s, user_id=user, kind="confirm", title="ok?", options=[], task_id=task_id
        )
        card_id = card.id
    async with db.session() as s:
        await write_status(s, StatusInput(task_id, "stopped", reason="by the person"))
    async with db.session() as s:
        got = await s.get(Card, card_id)
        assert got is not None and got.status == "expired"
    assert [e["status"] for e in await _status_events(db, user)] == ["stopped"]


async def test_no_task_is_a_non_retryable_error(db: Database) -> None:
    async with db.session() as s:
        with pytest.raises(ApplicationError) as err:
            await write_status(s, StatusInput("tsk_missing", "running"))
    assert err.value.non_retryable


async def test_a_status_write_leading_a_batch_is_answered_from_it(db: Database) -> None:
    """The model step sends its `running` with the reads (status_batch): the call inside the
    batch must take the batch's rows, not send the UPDATE again (which would find nothing
    to change and so not wake the person)."""
    user, task_id = await _task(db)
    change = StatusInput(task_id, "waiting_user", only_before_turn=3)
    ev = BELL.waiter(user)
    try:
        async with db.session() as s:
            at = clock.now()
            lead = status_batch(s, change, at)
            assert len(lead) == (1 if db.engine.dialect.name == "postgresql" else 0)
            async with prefetched(s, *lead, _TASK_STATUS.bind(task_id=task_id)):
                # In the batch the write went first: the read after it sees it.
                seen = "waiting_user" if lead else "running"
                assert await _TASK_STATUS.scalars(s, task_id=task_id) == [seen]
                await write_status(s, change, at)
        await asyncio.wait_for(ev.wait(), 5)
    finally:
        BELL.forget(user, ev)
    assert [e["status"] for e in await _status_events(db, user)] == ["waiting_user"]


async def test_an_event_in_a_batch_is_appended_once(db: Database) -> None:
    user, task_id = await _task(db)
    data = {"task_id": task_id, "text": "hello"}
    async with db.session() as s:
        at = clock.now()
        lead = event_batch(s, user, "task.reply", data, at)
        assert len(lead) == (1 if db.engine.dialect.name == "postgresql" else 0)
        async with prefetched(s, *lead):
            seq = await append_event(s, user, "task.reply", data, at=at)
    async with db.session() as s:
        rows = (await s.scalars(select(Event).where(Event.user_id == user))).all()
    assert [(e.seq, e.type, e.data) for e in rows] == [(seq, "task.reply", data)]


_TASK_STATUS = HotQuery(select(Task.status).where(Task.id == bindparam("task_id")))


async def test_start_call_marks_only_a_call_without_its_final_result(db: Database) -> None:
    """run_tool sends the `started` mark with the call's lock in one round trip: the lock's
    row is the state before the mark, and a call with its final result is left as it is
    (a replay returns the record; a `needs_confirmation` call runs again)."""
    _, task_id = await _task(db)
    at = clock.now()
    rows = [
        ("planned", None),
        ("started", None),
        ("needs_confirmation", {"card_id": "c"}),
        ("done", {"ok": 1}),
        ("outcome_unknown", {"status": "outcome_unknown"}),
    ]
    async with db.session() as s:
        for i, (status, result) in enumerate(rows):
            cid = f"{task_id}:1:1:{i}"
            await execute_all(
                s,
                PLAN_CALL.bind(
                    p_id=cid, p_task=task_id, p_use=f"tu{i}", p_name="t", p_input={}, p_at=at
                ),
                CALL_RESULT.bind(p_id=cid, p_status=status, p_result=result, p_at=at),
            )
    after = []
    for i, (status, result) in enumerate(rows):
        async with db.session() as s:
            found, _ = await execute_all(
                s,
                LOCK_CALL.bind(call_id=f"{task_id}:1:1:{i}"),
                START_CALL.bind(p_id=f"{task_id}:1:1:{i}", p_at=at),
            )
            assert found[0][:2] == (status, result)  # the row as it was before the mark
        async with db.session() as s:
            after.append(
                await s.scalar(
                    select(ToolCall.status).where(ToolCall.call_id == f"{task_id}:1:1:{i}")
                )
            )
    assert after == ["started", "started", "started", "done", "outcome_unknown"]

"""Withdrawing a message against its task reading it, at once: exactly one happens.

A model step takes its messages (`take_messages`) with one conditional write, and a
withdrawal is one conditional write the other way (journal/marks.py). Here the two run
at the same moment on separate connections, over and over, on both databases: each round
ends either withdrawn and not read, or read and not withdrawn, and the events say the same.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from journal.marks import take_messages, withdraw
from lomo.db.engine import Database
from lomo.db.models import Event, MessageRow, Task
from lomo.ids import new_id
from tests.runtime_support import add_message, new_user

ROUNDS = 40


async def _task(db: Database, user_id: str) -> str:
    task_id = new_id("tsk")
    async with db.session() as s:
        s.add(Task(id=task_id, user_id=user_id, kind="persistent", status="running", goal="g"))
    return task_id


async def _events(db: Database, user_id: str, kind: str) -> list[str]:
    async with db.session() as s:
        rows = await s.scalars(select(Event).where(Event.user_id == user_id, Event.type == kind))
        return [str(e.data["message_id"]) for e in rows]


async def test_withdraw_and_read_at_once_end_in_exactly_one(db: Database) -> None:
    user_id = await new_user(db)
    task_id = await _task(db, user_id)
    outcomes = {"read": 0, "withdrawn": 0}
    for i in range(ROUNDS):
        mid = await add_message(db, user_id, task_id, f"message {i}")
        gate = asyncio.Event()

        async def read(mid: str = mid, gate: asyncio.Event = gate) -> list[str]:
            await gate.wait()
            return await take_messages(db, user_id, task_id, [mid])

        async def take_back(mid: str = mid, gate: asyncio.Event = gate) -> MessageRow | None:
            await gate.wait()
            return await withdraw(db, user_id, mid)

        # Each side is scheduled first in turn.
        if i % 2:
            racing = asyncio.gather(read(), take_back())
        else:
            racing = asyncio.gather(take_back(), read())
        gate.set()
        got = await racing
        taken, row = (got[0], got[1]) if i % 2 else (got[1], got[0])
        assert row is not None
        withdrawn = row.withdrawn_at is not None
        assert (taken == [mid]) != withdrawn, f"round {i}: taken={taken} withdrawn={withdrawn}"
        assert (row.read_at is not None) == (taken == [mid])
        # Whichever lost stays lost: a later attempt of either changes nothing.
        assert await take_messages(db, user_id, task_id, [mid]) == taken
        again = await withdraw(db, user_id, mid)
        assert again is not None and (again.withdrawn_at is not None) == withdrawn
        outcomes["withdrawn" if withdrawn else "read"] += 1
    # Both outcomes happen (each side goes first in turn): the race was a real one.
    assert outcomes["read"] and outcomes["withdrawn"], outcomes
    read_events = await _events(db, user_id, "message.read")
    withdrawn_events = await _events(db, user_id, "message.withdrawn")
    assert len(read_events) == outcomes["read"] and len(set(read_events)) == outcomes["read"]
    assert len(withdrawn_events) == outcomes["withdrawn"]
    assert not set(read_events) & set(withdrawn_events)


async def test_a_withdrawn_message_is_left_out_of_a_step_with_others(db: Database) -> None:
    user_id = await new_user(db)
    task_id = await _task(db, user_id)
    kept = await add_message(db, user_id, task_id, "keep this")
    gone = await add_message(db, user_id, task_id, "forget this")
    row = await withdraw(db, user_id, gone)
    assert row is not None and row.withdrawn_at is not None
    assert await take_messages(db, user_id, task_id, [kept, gone]) == [kept]
    # Another person cannot withdraw it, nor can a step of another person take it.
    other = await new_user(db)
    assert await withdraw(db, other, kept) is None
    assert await take_messages(db, other, task_id, [kept]) == []

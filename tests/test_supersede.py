"""Which running jobs a message takes the request away from (journal/supersede.py), on the
database alone: a moved message's jobs are those of the turn that read it; a change
cancels every running job, but only if it is taken before the person withdraws it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from journal.marks import withdraw
from journal.supersede import CHANGED, MOVED, superseded_orders, turn_of
from lomo import clock
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.models import GenerationOrder, MessageRow, Task
from lomo.ids import new_id


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    d = Database(db_url)
    yield d
    await d.dispose()


async def _setup(db: Database) -> tuple[str, str, list[str]]:
    async with db.session() as s:
        user, _ = await create_user(s, "changer")
        tid = new_id("tsk")
        s.add(Task(id=tid, user_id=user.id, kind="persistent", goal="Cats"))
        await s.flush()  # the orders refer to it
        orders = []
        for turn, status in ((1, "running"), (2, "queued"), (2, "succeeded")):
            oid = new_id("ord")
            orders.append(oid)
            s.add(
                GenerationOrder(
                    id=oid,
                    workspace_id=user.id,
                    task_id=tid,
                    idempotency_key=f"{tid}:{turn}:1:{len(orders)}",
                    kind="image",
                    model="m",
                    params={"prompt": "a cat"},
                    status=status,
                )
            )
    return user.id, tid, orders


async def _message(db: Database, user_id: str, tid: str, text: str, **more: object) -> str:
    mid = new_id("msg")
    async with db.session() as s:
        s.add(MessageRow(id=mid, user_id=user_id, text=text, task_id=tid, **more))
    return mid


def test_the_turn_of_a_call_id() -> None:
    assert turn_of("tsk_a:3:1:0", "tsk_a") == 3
    assert turn_of("tsk_b:3:1:0", "tsk_a") is None
    assert turn_of("flowrun/node", "tsk_a") is None


async def test_a_moved_message_takes_its_turns_jobs(db: Database) -> None:
    user_id, tid, (first, second, _) = await _setup(db)
    moved = await _message(db, user_id, tid, "make a cat", processed_turn=2, read_at=clock.now())
    notice = await _message(
        db, user_id, tid, "[Notice]", target={"notice": "moved", "message_id": moved}
    )

    async def never(text: str) -> bool:
        raise AssertionError("a notice is not the person's words")

    got = await superseded_orders(db, user_id, tid, [notice], never)
    assert (got.order_ids, got.cause) == ([second], MOVED)  # turn 2's running job only
    assert first not in got.order_ids


async def test_a_change_takes_every_running_job_unless_withdrawn_first(db: Database) -> None:
    user_id, tid, (first, second, _) = await _setup(db)

    async def is_change(text: str) -> bool:
        return "instead" in text

    other = await _message(db, user_id, tid, "and a title please")
    got = await superseded_orders(db, user_id, tid, [other], is_change)
    assert got.order_ids == [] and got.cause == ""
    gone = await _message(db, user_id, tid, "a dog instead")
    assert await withdraw(db, user_id, gone) is not None
    got = await superseded_orders(db, user_id, tid, [gone], is_change)
    assert got.order_ids == []  # withdrawn before it was taken: it changed nothing
    change = await _message(db, user_id, tid, "a black cat instead")
    got = await superseded_orders(db, user_id, tid, [change], is_change)
    assert (got.order_ids, got.cause) == (sorted([first, second]), CHANGED)
    # Taken (read) by the check: too late to withdraw now.
    row = await withdraw(db, user_id, change)
    assert row is not None and row.withdrawn_at is None and row.read_at is not None

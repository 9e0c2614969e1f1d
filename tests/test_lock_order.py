"""Writers of a person's message rows and of their event counter lock the message rows
first (journal/store.py, journal/marks.py, journal/moves.py). A move that holds the
message's row and then appends its event must not deadlock against the step commit that
marks the same message processed: the commit waits for the row without holding the
counter. Postgres only: SQLite has one writer, so there is no lock order to get wrong."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import select, text

from context.segments import ContextPolicy
from journal.marks import take_messages
from journal.moves import mark_moved
from journal.store import StepStore
from journal.types import StatusChange, StepRecord
from lomo import clock
from lomo.db.engine import Database
from lomo.db.models import Event, MessageRow, Task
from lomo.events import append_event
from tests.helpers import eventually
from tests.runtime_support import add_message, new_user

_WAITING = text(
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


async def _blocked(db: Database) -> bool:
    async with db.session() as s:
        return bool(await s.scalar(_WAITING))


def _step(task_id: str, user: str, mid: str) -> StepRecord:
    """The turn's first step: it writes "running" and a reply, both events of the person's."""
    return StepRecord(
        task_id=task_id,
        user_id=user,
        turn=1,
        step=1,
        at=clock.now() + timedelta(seconds=1),
        context={"prefix": {}, "layers": []},
        response={"content": [{"type": "text", "text": "Noted."}], "stop_reason": "end_turn"},
        message_ids=[mid],
        reply="Noted.",
        running=StatusChange(task_id, "running", kind="persistent", only_before_turn=1),
    )


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_move_racing_the_step_commit_of_its_message_does_not_deadlock(
    db: Database,
) -> None:
    user = await new_user(db)
    task_id = "tsk_lockorder"
    async with db.session() as s:
        s.add(Task(id=task_id, user_id=user, kind="persistent", status="waiting_user", goal="x"))
    mid = await add_message(db, user, task_id, "make the sun orange and bigger")
    assert await take_messages(db, user, task_id, [mid]) == [mid]  # the step read it
    store = StepStore(db, ContextPolicy(segment_steps=4, recent_steps=2))

    async with db.session() as s:
        old = await s.get(MessageRow, mid)
        assert old is not None and await mark_moved(s, old, "msg_elsewhere")
        # The step commits while the move holds the message's row ...
        commit = asyncio.create_task(store.commit_step(_step(task_id, user, mid)))
        await eventually(lambda: _blocked(db), within=20)
        # ... and the move then appends its event: the counter must be free.
        await append_event(s, user, "message.moved", {"message_id": mid})
    await asyncio.wait_for(commit, timeout=20)

    async with db.session() as s:
        moved = await s.get(MessageRow, mid)
        assert moved is not None and moved.moved_to == "msg_elsewhere"
        assert moved.processed_turn == 1
        types = list(await s.scalars(select(Event.type)))
    assert "message.moved" in types and "task.reply" in types and "task.status" in types

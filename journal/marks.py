"""A message's marks that decide between a task reading it and the person taking it back.

A model step takes its new messages ("read", `read_at`) before the model sees them; the
person withdraws an unread message (`withdrawn_at`) or moves it to another task
(`moved_to`). Each is one conditional UPDATE of the message's row, the step's on the other
two being unset and theirs on `read_at` being unset: the row's write lock (Postgres) or the
one writer (SQLite) orders racing writes, and the later one finds its condition false.
Exactly one of a read and a withdrawal happens.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, select, update

from lomo import clock
from lomo.db.engine import Database
from lomo.db.models import MessageRow
from lomo.events import append_event
from lomo.states import EventType

# Still the person's to take back: neither withdrawn nor moved away.
OPEN: ColumnElement[bool] = and_(MessageRow.withdrawn_at.is_(None), MessageRow.moved_to.is_(None))
UNREAD: ColumnElement[bool] = and_(
    MessageRow.read_at.is_(None), MessageRow.processed_turn.is_(None)
)


async def take_messages(db: Database, user_id: str, task_id: str, ids: list[str]) -> list[str]:
    """The step's messages it may read, in order, marked read; a withdrawn message, or one
    moved away before it was read, is left out. A retried step takes them again: those an
    earlier attempt took stay its to read."""
    if not ids:
        return []
    async with db.session() as s:
        taken = list(
            await s.scalars(
                update(MessageRow)
                .where(MessageRow.id.in_(ids), MessageRow.user_id == user_id, UNREAD, OPEN)
                .values(read_at=clock.now())
                .returning(MessageRow.id)
                .execution_options(synchronize_session=False)
            )
        )
        for mid in sorted(taken):
            await append_event(
                s, user_id, EventType.MESSAGE_READ, {"message_id": mid, "task_id": task_id}
            )
        readable = set(
            await s.scalars(
                select(MessageRow.id).where(
                    MessageRow.id.in_(ids),
                    MessageRow.user_id == user_id,
                    MessageRow.read_at.is_not(None),
                )
            )
        )
    return [m for m in ids if m in readable]


async def withdraw(db: Database, user_id: str, message_id: str) -> MessageRow | None:
    """Mark the message withdrawn if it is unread and still the person's to take back, with
    its event. The row after the attempt (None: no such message of the person's); whether
    it was withdrawn now or before is in `withdrawn_at`, else it was read or moved."""
    at = clock.now()
    async with db.session() as s:
        done = (
            await s.execute(
                update(MessageRow)
                .where(MessageRow.id == message_id, MessageRow.user_id == user_id, UNREAD, OPEN)
                .values(withdrawn_at=at)
                .returning(MessageRow.task_id)
                .execution_options(synchronize_session=False)
            )
        ).first()
        if done is not None:
            data: dict[str, Any] = {"message_id": message_id, "task_id": done[0]}
            await append_event(s, user_id, EventType.MESSAGE_WITHDRAWN, data)
        row = await s.get(MessageRow, message_id, populate_existing=True)
    return row if row is not None and row.user_id == user_id else None

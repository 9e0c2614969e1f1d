"""Correcting what one said: withdrawing a message its task has not read, moving a message
to another task (docs/api.md, "Correcting a message").

The database decides: a withdrawal or a move is one conditional write of the message's
row against a model step's taking it (journal/marks.py). Temporal is told afterwards and
only to spare work: a task that still holds a withdrawn message's id finds it withdrawn
when its step takes its messages.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.dispatch import TemporalGetter
from api.dispatch.tasks import deliver_to_task, take_back
from api.schemas.messages import MessageIn, MessageView, MoveIn
from api.services.handoff import hand_over_bounded, within_bound
from api.services.messages import copies_of, message_view, store_message
from journal.marks import withdraw
from journal.moves import mark_moved, notice_row, was_read
from lomo.db.engine import Database
from lomo.db.models import MessageRow, Task, User
from lomo.errors import AlreadyRead, Conflict, InvalidInput, NotFound, TakenBack
from lomo.events import append_event
from lomo.ids import new_id
from lomo.settings import Settings
from lomo.states import EventType

log = logging.getLogger(__name__)


async def withdraw_message(
    db: Database, temporal: TemporalGetter, settings: Settings, user_id: str, message_id: str
) -> MessageView:
    """Withdrawn (again: the same answer), or 409 `already_read` once a step took it."""
    row = await withdraw(db, user_id, message_id)
    if row is None:
        raise NotFound(f"no message {message_id}")
    if row.withdrawn_at is None:
        raise _not_open(row)
    if row.task_id:
        await _tell_task(temporal, settings, row.task_id, row.id)
    return message_view(row)


def _not_open(row: MessageRow) -> Conflict:
    if row.withdrawn_at is not None:
        return TakenBack(f"message {row.id} was withdrawn", state="withdrawn")
    if row.moved_to is not None:
        return TakenBack(f"message {row.id} was moved to another task", state="moved")
    return AlreadyRead(f"message {row.id} was already read by its task", state="read")


async def _tell_task(
    temporal: TemporalGetter, settings: Settings, task_id: str, message_id: str
) -> None:
    async def go() -> None:
        await take_back(await temporal(), task_id, message_id)

    await within_bound(go(), f"taking back {message_id}", settings.handoff_wait_seconds)


async def move_message(
    db: Database,
    temporal: TemporalGetter,
    settings: Settings,
    user: User,
    message_id: str,
    body: MoveIn,
) -> MessageView:
    """The message goes to `body.task_id` as a new message there (its `moved_from` names
    this one); the task it leaves is told: one that had not read it drops it, one that had
    gets a notice not to act on it further."""
    async with db.session() as s:
        old = await s.get(MessageRow, message_id)
        if old is None or old.user_id != user.id:
            raise NotFound(f"no message {message_id}")
        if old.withdrawn_at is not None or old.moved_to is not None:
            raise _not_open(old)
        if old.task_id == body.task_id:
            raise InvalidInput(f"message {message_id} is already in task {body.task_id}")
        source, copy_id = old.task_id, new_id("msg")
        # The message's row first, then the copy and the events (the person's event
        # counter): the order every writer of both keeps, a step taking the message or
        # committing it as processed among them (tests/test_lock_order.py).
        if not await mark_moved(s, old, copy_id):
            raise _not_open(old)
        read = was_read(old)
        copy = await _copy(s, user.id, old, body.task_id, copy_id)
        await append_event(s, user.id, EventType.MESSAGE_MOVED, _moved_event(old, copy))
        view = message_view(old, await copies_of(s, [old]))
    try:
        await hand_over_bounded(db, temporal, settings, copy, first=True)
    except Conflict:
        log.warning("moved message %s: its task refused it now; the relay hands it over", copy.id)
    if source and read:
        await _notice(db, temporal, settings, old, source, copy)
    elif source:
        await _tell_task(temporal, settings, source, old.id)
    return view


async def _copy(
    s: AsyncSession, user_id: str, old: MessageRow, task_id: str, copy_id: str
) -> MessageRow:
    """The moved message as the other task receives it: same words and attachments. A
    target it cannot go to refuses the move (rolled back with it)."""
    target: dict[str, Any] = old.target or {}
    body = MessageIn(text=old.text, task_id=task_id, attachments=target.get("attachments", []))
    copy = await store_message(s, user_id, body, old.channel, old.id, copy_id)
    assert copy is not None  # no client_message_id: nothing to collide with
    return copy


def _moved_event(old: MessageRow, copy: MessageRow) -> dict[str, Any]:
    return {
        "message_id": old.id,
        "task_id": old.task_id,
        "to_message_id": copy.id,
        "to_task_id": copy.task_id,
    }


async def _notice(
    db: Database,
    temporal: TemporalGetter,
    settings: Settings,
    old: MessageRow,
    source: str,
    copy: MessageRow,
) -> None:
    """The task that read the message is told, as a message in its inbox that is not the
    person's words (its `target.notice`), that it belongs elsewhere now. Handed over once,
    within the bound; a task that ended meanwhile does not act on it anyway."""
    async with db.session() as s:
        goal = await s.scalar(select(Task.goal).where(Task.id == copy.task_id))
        row = notice_row(old, source, str(copy.task_id), str(goal or copy.task_id))
        s.add(row)

    async def go() -> None:
        # To the task only: a notice is not the person's words (no memory extraction).
        await deliver_to_task(await temporal(), source, row.id)

    try:
        await within_bound(go(), f"notice {row.id}", settings.handoff_wait_seconds)
    except Conflict:
        pass  # the task ended: it acts on nothing more

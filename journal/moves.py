"""Moving a message to another task, the parts the api (`POST /v1/messages/{id}/move`) and
the main thread ("that was meant for the posters") share: the conditional mark, the
message a phrase refers to, and the notice for a task that had already read it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from journal.marks import OPEN
from lomo import clock
from lomo.db.models import MessageRow
from lomo.ids import new_id
from lomo.states import RoutingStatus
from lomo.words import say
from routing.text import detect_language


async def mark_moved(s: AsyncSession, old: MessageRow, copy_id: str) -> bool:
    """Moved away unless withdrawn or moved meanwhile (the row's lock orders the writes);
    `old` is refreshed, so its `read_at` says whether its task read it first."""
    got = await s.scalar(
        update(MessageRow)
        .where(MessageRow.id == old.id, OPEN)
        .values(moved_to=copy_id)
        .returning(MessageRow.id)
        .execution_options(synchronize_session=False)
    )
    await s.refresh(old)
    return got is not None


def was_read(m: MessageRow) -> bool:
    return m.read_at is not None or m.processed_turn is not None


def is_notice(m: MessageRow) -> bool:
    """A note to a task that is not the person's words."""
    return bool((m.target or {}).get("notice"))


async def previous_message(s: AsyncSession, msg: MessageRow) -> MessageRow | None:
    """The person's message before `msg` that a task has: what "that was meant for …"
    refers to (neither withdrawn nor moved away yet, not a notice)."""
    rows = await s.scalars(
        select(MessageRow)
        .where(
            MessageRow.user_id == msg.user_id,
            MessageRow.id != msg.id,
            MessageRow.created_at <= msg.created_at,
            MessageRow.task_id.is_not(None),
            OPEN,
        )
        .order_by(MessageRow.created_at.desc(), MessageRow.id.desc())
        .limit(5)
    )
    return next((m for m in rows if not is_notice(m)), None)


def moved_copy(old: MessageRow, task_id: str) -> MessageRow:
    """The moved message as the other task receives it: its words and attachments, routed
    there directly (no model)."""
    target: dict[str, Any] = {"task_id": task_id}
    if attachments := (old.target or {}).get("attachments"):
        target["attachments"] = list(attachments)
    return MessageRow(
        id=new_id("msg"),
        user_id=old.user_id,
        text=old.text,
        target=target,
        routing_status=RoutingStatus.ROUTED,
        deterministic=True,
        decision="existing",
        task_id=task_id,
        channel=old.channel,
        moved_from=old.id,
    )


def notice_row(old: MessageRow, source: str, to_task: str, goal: str) -> MessageRow:
    """The note for the task `old` left after it had read it: not to act on it further.
    Marked handed over: whoever makes it hands it over once (the relay does not)."""
    return MessageRow(
        id=new_id("msg"),
        user_id=old.user_id,
        text=notice_text(old.text, goal),
        target={"notice": "moved", "message_id": old.id, "task_id": to_task},
        routing_status=RoutingStatus.ROUTED,
        deterministic=True,
        decision="existing",
        task_id=source,
        channel=old.channel,
        handed_at=clock.now(),
    )


def notice_text(said: str, goal: str) -> str:
    """The note in the task a message left, in the language the message was written in."""
    quoted = said if len(said) <= 200 else said[:200] + "…"
    return say("journal.moved", detect_language(said), said=quoted, goal=goal)

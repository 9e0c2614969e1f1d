"""The person's timeline: a view over the event log of what they said, the replies, and
the tasks and cards that came of it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.schemas.thread import Thread
from api.services.messages import copies_of, message_view
from lomo.db.models import Event, MessageRow
from lomo.states import EventType

THREAD_EVENTS = (
    EventType.MESSAGE_RECEIVED,
    EventType.TASK_REPLY,
    EventType.TASK_CREATED,
    EventType.TASK_STATUS,
    EventType.CARD_CREATED,
)


async def thread(s: AsyncSession, user_id: str, after: int, limit: int) -> Thread:
    rows = list(
        await s.scalars(
            select(Event)
            .where(Event.user_id == user_id, Event.seq > after, Event.type.in_(THREAD_EVENTS))
            .order_by(Event.seq)
            .limit(limit)
        )
    )
    # The event holds the message's id; its text is the message's own.
    ids = [e.data["message_id"] for e in rows if e.type == EventType.MESSAGE_RECEIVED]
    said = {m.id: m for m in await s.scalars(select(MessageRow).where(MessageRow.id.in_(ids)))}
    copies = await copies_of(s, list(said.values()))
    items = []
    for e in rows:
        item: dict[str, Any] = {"seq": e.seq, "type": e.type, "at": e.created_at.isoformat()}
        item.update(e.data)
        if e.type == EventType.MESSAGE_RECEIVED:
            item.update(_said(said.get(e.data["message_id"]), copies))
        items.append(item)
    # A full page may have more after it; the next page starts after its last event.
    after_next = rows[-1].seq if len(rows) == limit else None
    return Thread.model_validate({"items": items, "next": after_next})


def _said(m: MessageRow | None, copies: dict[str, str | None]) -> dict[str, Any]:
    """A message's line: its text, task and state (as `GET /v1/messages/{id}` has them)."""
    if m is None:
        return {"text": ""}
    view = message_view(m, copies).model_dump(exclude_none=True, exclude={"message_id", "routing"})
    return view

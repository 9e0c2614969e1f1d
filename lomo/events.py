"""The per-user, append-only event log with a gap-free monotonic sequence."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import Event, User


async def append_event(
    session: AsyncSession, user_id: str, type_: str, data: dict[str, Any]
) -> int:
    """Append in the caller's transaction; the counter row lock serializes writers per user."""
    seq = await session.scalar(
        update(User)
        .where(User.id == user_id)
        .values(event_seq=User.event_seq + 1)
        .returning(User.event_seq)
    )
    if seq is None:
        raise LookupError(f"no user {user_id}")
    session.add(Event(user_id=user_id, seq=seq, type=type_, data=data))
    await session.flush()
    return int(seq)


async def events_after(
    session: AsyncSession, user_id: str, after: int, limit: int = 500
) -> list[Event]:
    rows = await session.scalars(
        select(Event)
        .where(Event.user_id == user_id, Event.seq > after)
        .order_by(Event.seq)
        .limit(limit)
    )
    return list(rows)

"""The per-user, append-only event log with a gap-free monotonic sequence.

`BELL` wakes this process's event streams as soon as a transaction that appended an event
for their person commits (a callback handled by the api reaches its SSE clients at once);
events written by other processes (the worker) are found by the streams' polling.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import Any

from sqlalchemy import DateTime, String, event, insert, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from lomo.db.models import Event, User, utcnow


async def append_event(
    session: AsyncSession, user_id: str, type_: str, data: dict[str, Any]
) -> int:
    """Append in the caller's transaction; the counter row lock serializes writers per user."""
    if session.get_bind().dialect.name == "postgresql":
        seq = await session.scalar(_append_in_one(user_id, type_, data))
    else:  # SQLite has no UPDATE inside a WITH: the counter, then the row
        seq = await session.scalar(_bump(user_id))
        if seq is not None:
            await session.execute(
                insert(Event).values(user_id=user_id, seq=seq, type=type_, data=data)
            )
    if seq is None:
        raise LookupError(f"no user {user_id}")
    rings: set[str] = session.sync_session.info.setdefault("lomo_rings", set())
    if not rings:
        event.listen(session.sync_session, "after_commit", _ring_after_commit, once=True)
    rings.add(user_id)
    return int(seq)


def _bump(user_id: str) -> Any:
    return (
        update(User)
        .where(User.id == user_id)
        .values(event_seq=User.event_seq + 1)
        .returning(User.event_seq)
    )


def _append_in_one(user_id: str, type_: str, data: dict[str, Any]) -> Any:
    """One statement on Postgres (three events per agent step): the counter's UPDATE in a
    WITH, the event inserted from its RETURNING; no row when the person does not exist."""
    bump = _bump(user_id).cte("bump")
    row = select(
        literal(user_id, String()),
        bump.c.event_seq,
        literal(type_, String()),
        literal(data, Event.__table__.c.data.type),
        literal(utcnow(), DateTime(timezone=True)),
    )
    return (
        insert(Event)
        .from_select(["user_id", "seq", "type", "data", "created_at"], row)
        .returning(Event.seq)
    )


class Bell:
    """Per-person wake-ups for waiters on any event loop of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = (
            defaultdict(set)
        )

    def waiter(self, user_id: str) -> asyncio.Event:
        """Register before reading the log, wait after: a commit in between still wakes."""
        ev = asyncio.Event()
        with self._lock:
            self._waiters[user_id].add((asyncio.get_running_loop(), ev))
        return ev

    def forget(self, user_id: str, ev: asyncio.Event) -> None:
        with self._lock:
            waiters = self._waiters.get(user_id, set())
            for item in [w for w in waiters if w[1] is ev]:
                waiters.discard(item)
            if not waiters:
                self._waiters.pop(user_id, None)

    def ring(self, user_id: str) -> None:
        with self._lock:
            waiters = list(self._waiters.get(user_id, ()))
        for loop, ev in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(ev.set)


BELL = Bell()


def _ring_after_commit(session: Session) -> None:
    for user_id in session.info.pop("lomo_rings", set()):
        BELL.ring(user_id)


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

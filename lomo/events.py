"""The per-user, append-only event log with a gap-free monotonic sequence.

`BELL` wakes this process's event streams as soon as a transaction that appended an event
for their person commits (a callback handled by the api reaches its SSE clients at once).
Other processes' commits (the worker's replies, another api replica's) wake them too: on
Postgres through `LISTEN/NOTIFY` (`lomo/bell_notify.py`, any host), on SQLite through a
`Database` given a relay (`lomo/bell_relay.py`, one host); what a wake-up misses, the
streams' poll finds.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    CTE,
    DateTime,
    Insert,
    String,
    Table,
    bindparam,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from lomo.bell_notify import NotifyListener, is_postgres
from lomo.bell_relay import SESSION_KEY, BellRelay
from lomo.db.models import Event, User, utcnow
from lomo.db.query import Query


async def append_event(
    session: AsyncSession,
    user_id: str,
    type_: str,
    data: dict[str, Any],
    at: datetime | None = None,
) -> int:
    """Append in the caller's transaction; the counter row lock serializes writers per user."""
    conn = await session.connection()  # flushes the caller's pending changes first
    seq = await conn.scalar(_BUMP, {"p_user": user_id})
    if seq is None:
        raise LookupError(f"no user {user_id}")
    row = {
        "user_id": user_id,
        "seq": seq,
        "type": type_,
        "data": data,
        "created_at": at or utcnow(),
    }
    await conn.execute(insert(_EVENTS), row)
    ring_on_commit(session, user_id)
    return int(seq)


def event_queries(user_id: str, type_: str, data: dict[str, Any], at: datetime) -> list[Query]:
    """An event appended by two statements run in order in the caller's transaction: the
    person's counter bumped (its row lock serializes writers per person), then the event
    inserted with the counter's new value. The caller rings the bell after its commit."""
    values = {"p_user": user_id, "p_type": type_, "p_data": data, "p_at": at}
    return [Query(_BUMP, {"p_user": user_id}), Query(_APPEND_BUMPED, values)]


def ring_on_commit(session: AsyncSession, user_id: str) -> None:
    """Wake the person's event streams in this process once the caller commits."""
    rings: set[str] = session.sync_session.info.setdefault("lomo_rings", set())
    if not rings:
        event.listen(session.sync_session, "after_commit", _ring_after_commit, once=True)
    rings.add(user_id)


def ring(user_ids: set[str], relay: BellRelay | None) -> None:
    """Wake the streams of `user_ids` here, and through `relay` in other processes (for a
    writer that committed events outside a session)."""
    for user_id in user_ids:
        BELL.ring(user_id)
    if relay is not None and user_ids:
        relay.send(user_ids)


def event_after(changed: CTE) -> Insert:
    """Postgres, one statement: for the person in each row of `changed` (a write's RETURNING
    `user_id`, as a CTE), the counter bumped and an event appended; its values `p_type`,
    `p_data`, `p_ev_at`. Returns the persons: no row when `changed` wrote none (a
    conditional write that changed nothing appends nothing). Build it once per shape."""
    bump = (
        update(_USERS)
        .where(_USERS.c.id.in_(select(changed.c.user_id)))
        .values(event_seq=_USERS.c.event_seq + 1)
        .returning(_USERS.c.id, _USERS.c.event_seq)
        .cte("bump")
    )
    return (
        insert(_EVENTS)
        .from_select(
            ["user_id", "seq", "type", "data", "created_at"],
            select(
                bump.c.id,
                bump.c.event_seq,
                bindparam("p_type", type_=String()),
                bindparam("p_data", type_=_EVENTS.c.data.type),
                bindparam("p_ev_at", type_=DateTime(timezone=True)),
            ),
        )
        .returning(_EVENTS.c.user_id)
    )


# Parameters are named apart from the columns: a key naming a column would be taken as a
# value to set.
_USERS: Table = User.__table__  # type: ignore[assignment]
_EVENTS: Table = Event.__table__  # type: ignore[assignment]
_BUMP = (
    update(_USERS)
    .where(_USERS.c.id == bindparam("p_user"))
    .values(event_seq=_USERS.c.event_seq + 1)
    .returning(_USERS.c.event_seq)
)
_APPEND_BUMPED = insert(_EVENTS).from_select(
    ["user_id", "seq", "type", "data", "created_at"],
    select(
        _USERS.c.id,
        _USERS.c.event_seq,
        bindparam("p_type", type_=String()),
        bindparam("p_data", type_=_EVENTS.c.data.type),
        bindparam("p_at", type_=DateTime(timezone=True)),
    ).where(_USERS.c.id == bindparam("p_user")),
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
        _wake(waiters)

    def ring_all(self) -> None:
        """Every waiter of every person (after wake-ups may have been lost)."""
        with self._lock:
            waiters = [w for ws in self._waiters.values() for w in ws]
        _wake(waiters)


def _wake(waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]) -> None:
    for loop, ev in waiters:
        if not loop.is_closed():
            loop.call_soon_threadsafe(ev.set)


BELL = Bell()


def _ring_after_commit(session: Session) -> None:
    rings: set[str] = session.info.pop("lomo_rings", set())
    for user_id in rings:
        BELL.ring(user_id)
    relay: BellRelay | None = session.info.get(SESSION_KEY)
    if relay is not None and rings:
        relay.send(rings)


def bell_relay(directory: Path) -> BellRelay:
    """The relay of a process whose commits wake other processes' streams (and, once it
    `listen`s, whose streams they wake)."""
    return BellRelay(directory, BELL.ring)


def commit_relay(url: str, directory: Path) -> BellRelay | None:
    """What a process's commits of events send through to wake the other processes: none
    on Postgres (the trigger's NOTIFY reaches every listener), the host's relay on SQLite."""
    return None if is_postgres(url) else bell_relay(directory)


def notify_listener(url: str) -> NotifyListener:
    """Postgres: the listening session that wakes this process's streams for every event
    committed anywhere."""
    return NotifyListener(url, BELL.ring, BELL.ring_all)


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

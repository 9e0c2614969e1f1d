"""The per-user, append-only event log with a gap-free monotonic sequence.

`BELL` wakes this process's event streams as soon as a transaction that appended an event
for their person commits (a callback handled by the api reaches its SSE clients at once);
a session of a `Database` given a relay (`lomo/bell_relay.py`) wakes the other processes'
streams too (the worker's replies); what a wake-up misses, the streams' poll finds.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import CTE, DateTime, String, Table, bindparam, event, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from lomo.bell_relay import SESSION_KEY, BellRelay
from lomo.db.hot import Bound, HotQuery
from lomo.db.models import Event, User, utcnow


async def append_event(
    session: AsyncSession,
    user_id: str,
    type_: str,
    data: dict[str, Any],
    at: datetime | None = None,
) -> int:
    """Append in the caller's transaction; the counter row lock serializes writers per user.
    Inside a batch led by `event_batch(...)` with the same values it answers from that."""
    if session.new or session.dirty or session.deleted:
        # The caller's pending changes first, as the session's own execute would flush them:
        # row locks are then taken in the caller's order (a task's row, then the counter's),
        # the order every writer keeps.
        await session.flush()
    conn = await session.connection()
    at = at or utcnow()
    if conn.dialect.name == "postgresql":
        params = {"p_user": user_id, "p_type": type_, "p_data": data, "p_at": at}
        rows = await _APPEND_IN_ONE.rows(session, **params)
        seq = rows[0][0] if rows else None
    else:  # SQLite has no UPDATE inside a WITH: the counter, then the row
        seq = await conn.scalar(_BUMP, {"p_user": user_id})
        if seq is not None:
            row = {"user_id": user_id, "seq": seq, "type": type_, "data": data, "created_at": at}
            await conn.execute(insert(_EVENTS), row)
    if seq is None:
        raise LookupError(f"no user {user_id}")
    ring_on_commit(session, user_id)
    return int(seq)


def event_batch(
    session: AsyncSession, user_id: str, type_: str, data: dict[str, Any], at: datetime
) -> list[Bound]:
    """The event `append_event(..., at=at)` appends, to send within a batch (`prefetched`)
    where it is one statement (Postgres); elsewhere nothing, and the call appends it."""
    if session.get_bind().dialect.name != "postgresql":
        return []
    return [_APPEND_IN_ONE.bind(p_user=user_id, p_type=type_, p_data=data, p_at=at)]


def ring_on_commit(session: AsyncSession, user_id: str) -> None:
    """Wake the person's event streams in this process once the caller commits (for a
    writer that appended an event by `event_after`)."""
    rings: set[str] = session.sync_session.info.setdefault("lomo_rings", set())
    if not rings:
        event.listen(session.sync_session, "after_commit", _ring_after_commit, once=True)
    rings.add(user_id)


def event_after(source: CTE) -> HotQuery:
    """Postgres, one statement: for the person in each row of `source` (a write's RETURNING
    `user_id`, as a CTE), the counter bumped and an event appended; its values `p_type`,
    `p_data`, `p_ev_at`. Returns the persons, to `ring_on_commit`; no row when `source`
    wrote none (a conditional write that changed nothing appends nothing)."""
    bump = (
        update(_USERS)
        .where(_USERS.c.id.in_(select(source.c.user_id)))
        .values(event_seq=_USERS.c.event_seq + 1)
        .returning(_USERS.c.id, _USERS.c.event_seq)
        .cte("bump")
    )
    return HotQuery(
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


# The statements are built once, on the Core tables (three events per agent step): building
# the WITH statement per call cost more CPU than running it (issue 14). Parameters are named
# apart from the columns: a key naming a column would be taken as a value to set.
_USERS: Table = User.__table__  # type: ignore[assignment]
_EVENTS: Table = Event.__table__  # type: ignore[assignment]
_BUMP = (
    update(_USERS)
    .where(_USERS.c.id == bindparam("p_user"))
    .values(event_seq=_USERS.c.event_seq + 1)
    .returning(_USERS.c.event_seq)
)
# One statement on Postgres: the counter's UPDATE in a WITH, the event inserted from its
# RETURNING; no row when the person does not exist.
_BUMPED = _BUMP.cte("bump")
_APPEND_IN_ONE = HotQuery(
    insert(_EVENTS)
    .from_select(
        ["user_id", "seq", "type", "data", "created_at"],
        select(
            bindparam("p_user", type_=String()),
            _BUMPED.c.event_seq,
            bindparam("p_type", type_=String()),
            bindparam("p_data", type_=_EVENTS.c.data.type),
            bindparam("p_at", type_=DateTime(timezone=True)),
        ),
    )
    .returning(_EVENTS.c.seq)
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

"""The event bell across hosts on Postgres: `LISTEN lomo_events` (docs/architecture.md#events).

A trigger on `events` (migration 0014) sends `NOTIFY lomo_events, '<user id> <seq>'` in the
transaction that inserts the row; Postgres delivers it at the commit (never for a rollback)
to every listening session, on whatever host. Each api process keeps one such session here
and rings its streams' bell for the person named; the streams then read the log after the
last event they sent, so a notification only has to wake them, not carry the event.

A lost session (a restart or failover of the database, a broken network, an operator's
`pg_terminate_backend`) is reconnected with a growing, jittered delay. Notifications sent
while no session listened are gone, so once listening again every person with an open
stream here is rung: each stream re-reads the log from the last event it sent, and what
was written during the outage arrives in order and once. A session that stays silent is
checked with a query now and then, so a dead connection that never said so is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from collections.abc import Callable

import psycopg
from sqlalchemy import make_url

log = logging.getLogger(__name__)

CHANNEL = "lomo_events"
# Reconnect delays: the first after about this long, doubling up to the ceiling.
RECONNECT_MIN_S = 0.5
RECONNECT_MAX_S = 10.0
# A session silent this long is asked `SELECT 1` (a dead peer that sent no FIN).
CHECK_AFTER_S = 30.0
CONNECT_TIMEOUT_S = 10


def conninfo(url: str) -> str:
    """The libpq connection string of a SQLAlchemy Postgres URL (`postgresql+psycopg://`)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def is_postgres(url: str) -> bool:
    return make_url(url).get_backend_name() == "postgresql"


class NotifyListener:
    """One listening session per process; `ring(user_id)` per notification, `ring_all()`
    after each (re)connection."""

    def __init__(self, url: str, ring: Callable[[str], None], ring_all: Callable[[], None]) -> None:
        self.conninfo = conninfo(url)
        self.ring, self.ring_all = ring, ring_all
        self.application_name = f"lomo-bell-{os.getpid()}"
        self.connections = 0  # sessions that reached LISTEN (1 + reconnects)
        self.listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def listen(self) -> bool:
        """Start on the running loop (connecting in the background)."""
        self._task = asyncio.get_running_loop().create_task(self._run())
        return True

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        delay = RECONNECT_MIN_S
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.conninfo,
                    autocommit=True,
                    connect_timeout=CONNECT_TIMEOUT_S,
                    application_name=self.application_name,
                )
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.connections += 1
                    self.listening.set()
                    delay = RECONNECT_MIN_S
                    # What was committed while nobody listened here: the streams re-read.
                    self.ring_all()
                    await self._consume(conn)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # any failure of the session: connect again
                log.warning("event bell: listening session lost (%s); reconnecting", e)
            self.listening.clear()
            await asyncio.sleep(delay * random.uniform(1.0, 1.5))
            delay = min(delay * 2, RECONNECT_MAX_S)

    async def _consume(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        while True:
            async for n in conn.notifies(timeout=CHECK_AFTER_S):
                user_id, _, _seq = n.payload.partition(" ")
                if user_id:
                    self.ring(user_id)
            await conn.execute("SELECT 1")  # silent for a while: is the session alive?

"""Engine and session factory; SQLite gets WAL, a busy timeout and a writers' queue.

SQLite has one writer at a time. Its busy handler is a poll with growing sleeps, not a
queue: with dozens of transactions of one process waiting for the write lock (the api
under a burst of messages), some lose every poll for the whole busy timeout and fail with
"database is locked" while others go through. So within a process, a transaction that is
about to write first takes its turn in a FIFO queue (`_WriterQueue`); only one writer per
process then contends for SQLite's lock with the other processes' (the api with the
worker), which the busy handler settles. Reads never wait in the queue (WAL lets them run
beside the writer).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.util import await_only

BUSY_TIMEOUT_MS = 10_000
# A turn in the queue may take a while behind a burst of writers; the bound only turns a
# writer nested inside another writer of the same task (waiting on itself) into an error.
WRITER_WAIT_S = 60.0
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class _WriterQueue:
    """One writing transaction per process at a time, in arrival order.

    The turn is taken in `before_cursor_execute` on the first write of a transaction (the
    statement that makes pysqlite begin one) and given back when that connection commits,
    rolls back or goes back to the pool. A turn not granted within `WRITER_WAIT_S` fails
    the way SQLite itself would, so a writer nested inside another writer of the same task
    ends with "database is locked" instead of waiting forever.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        # asyncio locks belong to one loop; tests and CLIs may run several loops in turn.
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    def before_execute(self, conn: Any, _cursor: Any, stmt: str, *_: Any) -> None:
        if "lomo_write_turn" in conn.info:
            return
        head = stmt.lstrip()[:7].upper()
        if not head.startswith(_WRITES):
            return
        lock = self._lock()
        try:
            await_only(asyncio.wait_for(lock.acquire(), self.timeout_s))
        except TimeoutError as e:
            raise OperationalError(stmt, None, Exception("database is locked")) from e
        conn.info["lomo_write_turn"] = lock

    @staticmethod
    def _release(info: dict[str, Any]) -> None:
        lock = info.pop("lomo_write_turn", None)
        if lock is not None and lock.locked():
            lock.release()

    def end(self, conn: Any) -> None:
        self._release(conn.info)

    def end_record(self, _dbapi_conn: Any, record: Any, *_: Any) -> None:
        # The pool hands the connection back (or drops it) without a Connection-level
        # commit/rollback, e.g. after an error while the session was closed.
        self._release(record.info)


def _sqlite_pragmas(busy_ms: int) -> Any:
    def apply(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    return apply


def make_engine(
    url: str, busy_timeout_ms: int = BUSY_TIMEOUT_MS, writer_wait_s: float = WRITER_WAIT_S
) -> AsyncEngine:
    if url.startswith("sqlite"):
        engine = create_async_engine(url)
        sync = engine.sync_engine
        event.listen(sync, "connect", _sqlite_pragmas(busy_timeout_ms))
        queue = _WriterQueue(writer_wait_s)
        event.listen(sync, "before_cursor_execute", queue.before_execute)
        event.listen(sync, "commit", queue.end)
        event.listen(sync, "rollback", queue.end)
        # Connection.info is the pool record's info: checkin/invalidate see the same dict.
        event.listen(sync.pool, "checkin", queue.end_record)
        event.listen(sync.pool, "invalidate", queue.end_record)
        return engine
    return create_async_engine(url, pool_size=10, max_overflow=10, pool_pre_ping=True)


def sync_url(url: str) -> str:
    """The same database for sync tools (Alembic)."""
    return url.replace("sqlite+aiosqlite", "sqlite")


class Database:
    def __init__(
        self,
        url: str,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        writer_wait_s: float = WRITER_WAIT_S,
    ) -> None:
        self.url = url
        self.engine = make_engine(url, busy_timeout_ms, writer_wait_s)
        self.sessionmaker = async_sessionmaker(self.engine, expire_on_commit=False)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A unit of work: committed on success, rolled back on any error."""
        async with self.sessionmaker() as s:
            try:
                yield s
                await s.commit()
            except BaseException:
                await s.rollback()
                raise

    async def dispose(self) -> None:
        await self.engine.dispose()

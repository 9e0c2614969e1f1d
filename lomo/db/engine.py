"""Engine and session factory; SQLite gets WAL, a busy timeout and a writers' queue.

SQLite has one writer at a time. Its busy handler is a poll with growing sleeps, not a
queue: with dozens of transactions of one process waiting for the write lock (the api
under a burst of messages), some lose every poll for the whole busy timeout and fail with
"database is locked" while others go through. So within a process, a transaction that is
about to write first takes its turn in a FIFO queue (`_WriterQueue`), and then an
exclusive `flock` on a file beside the database, which every process's writer takes: the
api's writer does not poll against a worker whose writers follow each other without a gap
(polling, it can lose every poll for 10 s under load); it waits in the kernel and is woken
at the release. Reads never wait (WAL lets them run beside the writer).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import select
import threading
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event, make_url
from sqlalchemy.exc import DisconnectionError, OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.util import await_only

from lomo.bell_relay import SESSION_KEY, BellRelay

BUSY_TIMEOUT_MS = 10_000
# A pooled Postgres connection idle for longer is pinged at checkout (`_LivenessCheck`).
PING_AFTER_IDLE_S = 2.0
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

    def __init__(self, timeout_s: float, lock_path: str | None = None) -> None:
        self.timeout_s = timeout_s
        self.lock_path = lock_path
        self._fd: int | None = None
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
        if self.lock_path is None:
            return
        try:
            conn.info["lomo_file_lock"] = await_only(self._file_lock())
        except TimeoutError as e:
            self._release(conn.info)
            raise OperationalError(stmt, None, Exception("database is locked")) from e

    async def _file_lock(self) -> int:
        """The writers' file lock, shared by every process on this database."""
        if self._fd is None:
            assert self.lock_path is not None
            self._fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        fd = self._fd
        try:  # free: no thread
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            pass
        abandoned = threading.Event()
        taking = asyncio.get_running_loop().run_in_executor(None, _take_file_lock, fd, abandoned)
        try:
            await asyncio.wait_for(asyncio.shield(taking), self.timeout_s)
        except TimeoutError:
            # The thread may still get the lock: it gives it back at once then.
            abandoned.set()
            taking.add_done_callback(lambda f: _give_back_if_taken(f, fd))
            raise
        return fd

    @staticmethod
    def _release(info: dict[str, Any]) -> None:
        fd = info.pop("lomo_file_lock", None)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
        lock = info.pop("lomo_write_turn", None)
        if lock is not None and lock.locked():
            lock.release()

    def end(self, conn: Any) -> None:
        self._release(conn.info)

    def end_commit(self, conn: Any) -> None:
        # SQLAlchemy's "commit" event comes before the DBAPI commit: handing the turn on
        # there lets the next writer (of another process, too) find SQLite's lock still
        # held and poll against it. Committing here first makes the hand-over clean; the
        # DBAPI commit that follows finds no transaction and does nothing.
        if "lomo_write_turn" in conn.info:
            conn.connection.dbapi_connection.commit()
        self._release(conn.info)

    def end_record(self, _dbapi_conn: Any, record: Any, *_: Any) -> None:
        # The pool hands the connection back (or drops it) without a Connection-level
        # commit/rollback, e.g. after an error while the session was closed.
        self._release(record.info)


def _take_file_lock(fd: int, abandoned: threading.Event) -> bool:
    fcntl.flock(fd, fcntl.LOCK_EX)
    if abandoned.is_set():
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    return True


def _give_back_if_taken(f: asyncio.Future[bool], fd: int) -> None:
    if not f.cancelled() and f.exception() is None and f.result():
        fcntl.flock(fd, fcntl.LOCK_UN)


def writers_lock_path(url: str) -> str | None:
    """The file every process's writer locks: beside the database file (none in memory)."""
    path = make_url(url).database
    return None if not path or path == ":memory:" else f"{path}-writers.lock"


def _sqlite_pragmas(busy_ms: int) -> Any:
    def apply(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    return apply


def make_engine(
    url: str,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    writer_wait_s: float = WRITER_WAIT_S,
    file_lock: bool = True,
    ping_after_idle_s: float = PING_AFTER_IDLE_S,
) -> AsyncEngine:
    """`file_lock`: the writers' lock beside the database file (off only for a test
    proving the load needs it). `ping_after_idle_s`: see `_LivenessCheck` (Postgres)."""
    if url.startswith("sqlite"):
        engine = create_async_engine(url)
        sync = engine.sync_engine
        event.listen(sync, "connect", _sqlite_pragmas(busy_timeout_ms))
        queue = _WriterQueue(writer_wait_s, writers_lock_path(url) if file_lock else None)
        event.listen(sync, "before_cursor_execute", queue.before_execute)
        event.listen(sync, "commit", queue.end_commit)
        event.listen(sync, "rollback", queue.end)
        # Connection.info is the pool record's info: checkin/invalidate see the same dict.
        event.listen(sync.pool, "checkin", queue.end_record)
        event.listen(sync.pool, "invalidate", queue.end_record)
        return engine
    engine = create_async_engine(
        url,
        pool_size=10,
        max_overflow=10,
        # A peer that vanished without closing (a crashed host, a moved address, a NAT
        # that forgot the flow) is found by the kernel within about a minute of silence.
        connect_args={
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 10,
            "keepalives_count": 3,
        },
    )
    _LivenessCheck(engine.dialect, ping_after_idle_s).install(engine.sync_engine.pool)
    return engine


class _LivenessCheck:
    """A pooled Postgres connection that died while idle is replaced at checkout.

    Instead of `pool_pre_ping` (a round trip per checkout, 0.6 ms of a 1.3 ms one-statement
    session here, and ten checkouts per agent step), the socket is looked at: an idle
    connection has nothing to read unless the server closed it or sent its goodbye (a
    restart, `pg_terminate_backend`), so a readable or broken one is dropped, and the pool
    opens a fresh one (it retries a checkout that raises `DisconnectionError`). A peer gone
    without a word leaves nothing to read, so a connection idle for longer than
    `ping_after_idle_s` is still pinged: that is when such losses happen, and a connection
    busy on the hot path is reused within milliseconds.
    """

    def __init__(self, dialect: Any, ping_after_idle_s: float) -> None:
        self.dialect = dialect
        self.ping_after_idle_s = ping_after_idle_s

    def install(self, pool: Any) -> None:
        event.listen(pool, "checkout", self.checkout)
        event.listen(pool, "checkin", self.checkin)

    @staticmethod
    def checkin(_dbapi_conn: Any, record: Any) -> None:
        if record is not None:
            record.info["lomo_idle_since"] = time.monotonic()

    def checkout(self, dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        conn = dbapi_conn.driver_connection
        if conn.closed or conn.broken:
            raise DisconnectionError("connection closed")
        # poll, not select: select cannot watch a descriptor numbered 1024 or more (an api
        # with many open streams has those).
        watch = select.poll()
        watch.register(conn.pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
        if watch.poll(0):
            raise DisconnectionError("the server closed the idle connection")
        idle_since = record.info.get("lomo_idle_since")
        if idle_since is not None and time.monotonic() - idle_since > self.ping_after_idle_s:
            try:
                self.dialect.do_ping(dbapi_conn)
            except Exception as e:  # any failure of the ping: the connection is not usable
                raise DisconnectionError(f"ping failed: {e}") from e


def sync_url(url: str) -> str:
    """The same database for sync tools (Alembic)."""
    return url.replace("sqlite+aiosqlite", "sqlite")


class Database:
    def __init__(
        self,
        url: str,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        writer_wait_s: float = WRITER_WAIT_S,
        ping_after_idle_s: float = PING_AFTER_IDLE_S,
        relay: BellRelay | None = None,
    ) -> None:
        self.url = url
        self.relay = relay
        self.engine = make_engine(
            url, busy_timeout_ms, writer_wait_s, ping_after_idle_s=ping_after_idle_s
        )
        # Each session's commits of events wake other processes' streams through `relay`.
        info = {SESSION_KEY: relay} if relay is not None else {}
        self.sessionmaker = async_sessionmaker(self.engine, expire_on_commit=False, info=info)

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

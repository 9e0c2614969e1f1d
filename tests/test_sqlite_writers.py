"""SQLite's one writer: a burst of writing transactions in one process must queue, not fail.

The api under 50 concurrent messages answered some with 500 "database is locked": SQLite's
busy handler polls, so under a crowd some writers lose every poll until the busy timeout.
`lomo.db.engine` queues a process's writers instead. These tests hold each writer's
transaction open across an await (as a request does while the event loop serves others)
with a busy timeout far shorter than the queue, so only the queue can carry them all.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from lomo.db.engine import Database, _sqlite_pragmas, make_engine

WRITERS = 40
HOLD_S = 0.02  # 40 × 20 ms = 0.8 s of writing in all, far over the 0.2 s busy timeout
BUSY_MS = 200


async def _burst(session_factory: object, n: int) -> list[BaseException | None]:
    async def writer(i: int) -> None:
        async with session_factory() as s:  # type: ignore[operator]
            await s.execute(text("SELECT count(*) FROM t"))  # a read first, as accept does
            await s.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": i})
            await asyncio.sleep(HOLD_S)
            await s.execute(text("UPDATE t SET v = v WHERE v = :v"), {"v": i})
            await s.commit()

    return await asyncio.gather(*(writer(i) for i in range(n)), return_exceptions=True)


async def _make_table(url: str) -> None:
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)"))
    await engine.dispose()


async def test_a_burst_of_writers_queues_instead_of_failing(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    await _make_table(url)
    db = Database(url, busy_timeout_ms=BUSY_MS)
    try:
        results = await _burst(db.sessionmaker, WRITERS)
        assert [r for r in results if r is not None] == []
        async with db.session() as s:
            assert await s.scalar(text("SELECT count(*) FROM t")) == WRITERS
    finally:
        await db.dispose()


async def test_the_same_burst_fails_without_the_queue(tmp_path: Path) -> None:
    """The load above is one that SQLite's busy handler alone does not carry: without
    this, the first test could pass on a load too light to need the queue."""
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import async_sessionmaker

    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    await _make_table(url)
    engine = create_async_engine(url)
    event.listen(engine.sync_engine, "connect", _sqlite_pragmas(BUSY_MS))
    try:
        results = await _burst(async_sessionmaker(engine), WRITERS)
        locked = [r for r in results if isinstance(r, OperationalError)]
        assert locked, "every writer got through without a queue: the load proves nothing"
        assert all("database is locked" in str(r) for r in locked)
    finally:
        await engine.dispose()


async def test_a_writer_nested_in_its_own_writer_fails_instead_of_hanging(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    await _make_table(url)
    db = Database(url, busy_timeout_ms=BUSY_MS, writer_wait_s=0.5)
    try:
        async with db.session() as outer:
            await outer.execute(text("INSERT INTO t (v) VALUES (1)"))
            with pytest.raises(OperationalError, match="database is locked"):
                async with db.session() as inner:
                    await inner.execute(text("INSERT INTO t (v) VALUES (2)"))
        # The outer transaction committed and the queue is free again.
        async with db.session() as s:
            await s.execute(text("INSERT INTO t (v) VALUES (3)"))
            assert await s.scalar(text("SELECT count(*) FROM t")) == 2
    finally:
        await db.dispose()


async def test_a_failed_writer_gives_its_turn_back(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    await _make_table(url)
    db = Database(url, busy_timeout_ms=BUSY_MS, writer_wait_s=0.5)
    try:
        with pytest.raises(OperationalError):
            async with db.session() as s:
                await s.execute(text("INSERT INTO t (v) VALUES (1)"))
                await s.execute(text("INSERT INTO nowhere (v) VALUES (1)"))
        async with db.session() as s:  # would wait out writer_wait_s if the turn were kept
            await s.execute(text("INSERT INTO t (v) VALUES (2)"))
        async with db.session() as s:
            assert await s.scalar(text("SELECT count(*) FROM t")) == 1
    finally:
        await db.dispose()


CHILD = """
import asyncio, sys
from sqlalchemy import text
import lomo.db.engine as engine
from tests.test_sqlite_writers import BUSY_MS, WRITERS, _burst
if sys.argv[2] == "nolock":
    engine.writers_lock_path = lambda url: None
async def main():
    db = engine.Database(sys.argv[1], busy_timeout_ms=BUSY_MS)
    print("ready", flush=True)
    results = await _burst(db.sessionmaker, 4 * WRITERS)
    await db.dispose()
    print(sum(r is not None for r in results))
asyncio.run(main())
"""


ROOT = Path(__file__).resolve().parent.parent


async def _two_processes(tmp_path: Path, file_lock: bool) -> tuple[int, int]:
    """A burst of writers here and one in a child process at once: (failed here, there)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    await _make_table(url)
    mode = "lock" if file_lock else "nolock"
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, url, mode, cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )
    db = Database(url, busy_timeout_ms=BUSY_MS)
    if not file_lock:
        db = Database.__new__(Database)
        db.url = url
        db.engine = make_engine(url, BUSY_MS, file_lock=False)
        db.sessionmaker = async_sessionmaker(db.engine, expire_on_commit=False)
    try:
        # A longer burst in the child (the worker's writers following each other), this
        # one meanwhile (the api's)
        assert child.stdout is not None
        assert (await asyncio.wait_for(child.stdout.readline(), 60)).strip() == b"ready"
        here = await _burst(db.sessionmaker, WRITERS)
        out, _ = await asyncio.wait_for(child.communicate(), 120)
        assert child.returncode == 0
        return sum(r is not None for r in here), int(out.decode().strip())
    finally:
        await db.dispose()


async def test_two_processes_bursts_take_turns(tmp_path: Path) -> None:
    """The api and the worker: each process's queue leaves one writer per process, and
    SQLite's polling busy handler starves the one that sleeps while the other's writers
    follow each other without a gap. The writers' file lock makes them take turns."""
    assert await _two_processes(tmp_path, file_lock=True) == (0, 0)


async def test_two_processes_bursts_fail_without_the_file_lock(tmp_path: Path) -> None:
    """The load above is one the per-process queues alone do not carry."""
    here, there = await _two_processes(tmp_path, file_lock=False)
    assert here + there > 0, "both bursts got through without the file lock: proves nothing"


async def test_the_turn_is_handed_on_only_after_sqlite_released_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the moment a writer gives its turn back, another connection can begin a write at
    once: the next writer (of any process) never polls against a commit still under way."""
    import sqlite3

    from lomo.db import engine as engine_module

    path = tmp_path / "w.db"
    url = f"sqlite+aiosqlite:///{path}"
    await _make_table(url)
    free_at_release: list[bool] = []
    release = engine_module._WriterQueue._release

    def probing_release(info: dict[str, object]) -> None:
        if "lomo_write_turn" in info:
            other = sqlite3.connect(path, timeout=0, isolation_level=None)
            try:
                other.execute("BEGIN IMMEDIATE")
                other.execute("ROLLBACK")
                free_at_release.append(True)
            except sqlite3.OperationalError:
                free_at_release.append(False)
            finally:
                other.close()
        release(info)

    monkeypatch.setattr(engine_module._WriterQueue, "_release", staticmethod(probing_release))
    db = Database(url, busy_timeout_ms=BUSY_MS)
    try:
        async with db.session() as s:
            await s.execute(text("INSERT INTO t (v) VALUES (1)"))
            await s.commit()
        async with db.session() as s:
            assert await s.scalar(text("SELECT count(*) FROM t")) == 1
    finally:
        await db.dispose()
    assert free_at_release == [True]

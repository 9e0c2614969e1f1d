"""Postgres transactions begin with their first write, in that write's round trip, and may
commit in their last one (lomo/db/begin.py, issue 14): what a session reads, writes, locks
and rolls back is what it was with psycopg's own BEGIN, in fewer round trips."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.pq import Trace
from sqlalchemy import Column, Integer, MetaData, String, Table, bindparam, insert, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.begin import CommittedEarly, needs_transaction
from lomo.db.engine import Database
from lomo.db.hot import HotQuery, execute_all
from tests.conftest import _fresh_pg_url, _pg_available

_META = MetaData()
_T = Table("t", _META, Column("id", Integer, primary_key=True), Column("v", String))
ADD = HotQuery(insert(_T).values(id=bindparam("p_id"), v=bindparam("p_v")))
GET = HotQuery(select(_T.c.v).where(_T.c.id == bindparam("id")))
LOCK = HotQuery(select(_T.c.v).where(_T.c.id == bindparam("id")).with_for_update())


@pytest.fixture
async def pg() -> AsyncIterator[tuple[Database, str]]:
    if not _pg_available():
        if os.environ.get("CI") == "true":
            pytest.fail("Postgres is unreachable under CI=true")
        pytest.skip("Postgres not reachable")
    url = _fresh_pg_url()
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as c:
        c.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        c.execute("INSERT INTO t VALUES (1, 'one')")
    db = Database(url)
    yield db, plain
    await db.dispose()


def _seen_elsewhere(plain: str, id_: int) -> list[str]:
    with psycopg.connect(plain, autocommit=True) as c:
        return [r[0] for r in c.execute("SELECT v FROM t WHERE id = %s", (id_,))]


async def _driver(s: AsyncSession) -> Any:
    return (await (await s.connection()).get_raw_connection()).driver_connection


class _Trips:
    """Counts the session's round trips: messages the client sent before waiting for an
    answer (libpq's protocol trace)."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.file = Path(tempfile.mkstemp(suffix=".trace")[1])

    def __enter__(self) -> _Trips:
        self.fh = self.file.open("w")
        self.driver.pgconn.trace(self.fh.fileno())
        self.driver.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
        return self

    def __exit__(self, *_: Any) -> None:
        self.driver.pgconn.untrace()
        self.fh.close()

    def lines(self) -> list[str]:
        return self.file.read_text().splitlines()

    def count(self) -> int:
        trips, last = 0, "B"
        for line in self.lines():
            side = line.split("\t", 1)[0]
            if side == "F" and last == "B":
                trips += 1
            last = side
        return trips


def test_what_needs_the_transaction() -> None:
    assert not needs_transaction("SELECT v FROM t WHERE id = 1")
    assert not needs_transaction("  select 1")
    assert not needs_transaction("SHOW transaction_isolation")
    for sql in (
        "SELECT v FROM t WHERE id = 1 FOR UPDATE",
        "SELECT v FROM t FOR NO KEY UPDATE SKIP LOCKED",
        "select * from t for share",
        "SELECT pg_advisory_xact_lock(1)",
        "WITH x AS (UPDATE t SET v = 'a' RETURNING id) SELECT * FROM x",
        "INSERT INTO t VALUES (2, 'two')",
        "SAVEPOINT sa_1",
        "LOCK TABLE t",
        "",
    ):
        assert needs_transaction(sql), sql


async def test_a_session_that_only_reads_opens_no_transaction(pg: tuple[Database, str]) -> None:
    db, _ = pg
    async with db.session() as s:
        driver = await _driver(s)
        with _Trips(driver) as trips:
            assert await GET.rows(s, id=1) == [("one",)]
            assert (await s.execute(text("SELECT v FROM t"))).all() == [("one",)]
            assert driver.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    # Two reads, two round trips; no BEGIN, and the session's commit sent nothing.
    assert trips.count() == 2
    assert not [ln for ln in trips.lines() if "BEGIN" in ln or "COMMIT" in ln]


async def test_a_write_begins_the_transaction_in_its_own_round_trip(
    pg: tuple[Database, str],
) -> None:
    db, plain = pg
    async with db.sessionmaker() as s:
        driver = await _driver(s)
        with _Trips(driver) as trips:
            await execute_all(s, ADD.bind(p_id=2, p_v="two"), GET.bind(id=2))
        assert trips.count() == 1 and any('"BEGIN"' in ln for ln in trips.lines())
        assert await GET.rows(s, id=2) == [("two",)]  # the session sees its own write
        assert _seen_elsewhere(plain, 2) == []  # nobody else does
        await s.rollback()
    assert _seen_elsewhere(plain, 2) == []
    async with db.session() as s:  # the ORM's write begins it too
        await s.execute(text("INSERT INTO t VALUES (3, 'three')"))
        assert _seen_elsewhere(plain, 3) == []
        await s.execute(text("INSERT INTO t VALUES (4, 'four')"))
    assert _seen_elsewhere(plain, 3) == ["three"] and _seen_elsewhere(plain, 4) == ["four"]


async def test_a_failed_statement_leaves_nothing_of_the_batch(pg: tuple[Database, str]) -> None:
    db, plain = pg
    async with db.sessionmaker() as s:
        with pytest.raises(IntegrityError):
            await execute_all(s, ADD.bind(p_id=5, p_v="five"), ADD.bind(p_id=1, p_v="again"))
        await s.rollback()
        assert await GET.rows(s, id=1) == [("one",)]  # and the connection works on
    assert _seen_elsewhere(plain, 5) == []


async def test_a_locking_read_holds_its_lock_until_the_session_ends(
    pg: tuple[Database, str],
) -> None:
    db, plain = pg
    with psycopg.connect(plain, autocommit=True) as other:
        other.execute("SET lock_timeout = '100ms'")
        async with db.session() as s:
            assert await LOCK.rows(s, id=1) == [("one",)]
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("SELECT v FROM t WHERE id = 1 FOR UPDATE")
        other.execute("SELECT v FROM t WHERE id = 1 FOR UPDATE")  # released with the commit


async def test_a_savepoint_is_inside_the_transaction(pg: tuple[Database, str]) -> None:
    db, plain = pg
    async with db.session() as s:
        await execute_all(s, ADD.bind(p_id=6, p_v="six"))
        with pytest.raises(DBAPIError):
            async with s.begin_nested():
                await s.execute(text("INSERT INTO t VALUES (1, 'dup')"))
        await execute_all(s, ADD.bind(p_id=7, p_v="seven"))
    assert _seen_elsewhere(plain, 6) == ["six"] and _seen_elsewhere(plain, 7) == ["seven"]


async def test_a_commit_sent_with_the_last_statements(pg: tuple[Database, str]) -> None:
    """One round trip writes and commits; a later write in the session is refused (it would
    be a transaction of its own) and stores nothing; reads still work."""
    db, plain = pg
    async with db.sessionmaker() as s:
        driver = await _driver(s)
        with _Trips(driver) as trips:
            await execute_all(s, ADD.bind(p_id=8, p_v="eight"), commit=True)
        assert trips.count() == 1
        assert _seen_elsewhere(plain, 8) == ["eight"]  # before the session commits
        assert await GET.rows(s, id=8) == [("eight",)]
        with pytest.raises(CommittedEarly):
            await execute_all(s, ADD.bind(p_id=9, p_v="nine"))
        with pytest.raises(CommittedEarly):
            await s.execute(text("INSERT INTO t VALUES (9, 'nine')"))
        await s.rollback()
    assert _seen_elsewhere(plain, 9) == []
    async with db.session() as s:  # the next transaction on the same connection is free
        await execute_all(s, ADD.bind(p_id=9, p_v="nine"))
    assert _seen_elsewhere(plain, 9) == ["nine"]


async def test_a_commit_with_reads_only_and_an_open_transaction(pg: tuple[Database, str]) -> None:
    db, plain = pg
    async with db.sessionmaker() as s:
        await s.execute(text("INSERT INTO t VALUES (10, 'ten')"))  # the ORM opened it
        await execute_all(s, GET.bind(id=10), commit=True)  # a read commits it
        assert _seen_elsewhere(plain, 10) == ["ten"]
        await s.commit()
    async with db.sessionmaker() as s:
        driver = await _driver(s)
        with _Trips(driver) as trips:  # nothing open: nothing to commit, no COMMIT sent
            assert await execute_all(s, GET.bind(id=10), commit=True) == [[("ten",)]]
        assert not [ln for ln in trips.lines() if "COMMIT" in ln]
        await s.commit()

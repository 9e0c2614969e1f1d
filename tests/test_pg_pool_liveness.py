"""A pooled Postgres connection the server closed while idle is replaced at checkout.

The pool does not ping on every checkout (a round trip each, ten per agent step): it looks
at the socket instead (`lomo/db/engine.py` `_drop_if_dead`). These tests close the pool's
connections from the server side, as a Postgres restart does, and require the next unit
of work to succeed on the first try.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from sqlalchemy import text

from lomo.db.engine import Database
from tests.conftest import PG_ADMIN, _fresh_pg_url, _pg_available

pytestmark = pytest.mark.skipif(not _pg_available(), reason="Postgres not reachable")


async def _backends(db: Database, n: int) -> set[int]:
    """Open `n` pooled connections at once and give them back idle: their server pids."""
    gate, all_open = asyncio.Event(), asyncio.Event()
    pids: set[int] = set()

    async def hold() -> None:
        async with db.session() as s:
            pids.add(int(await s.scalar(text("SELECT pg_backend_pid()"))))
            if len(pids) == n:
                all_open.set()
            await gate.wait()

    tasks = [asyncio.create_task(hold()) for _ in range(n)]
    await all_open.wait()
    gate.set()
    await asyncio.gather(*tasks)
    return pids


def _terminate(pids: set[int]) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # pg_terminate_backend only signals: wait until the backends are gone.
        for _ in range(200):
            left = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (list(pids),)
            ).fetchone()
            if left and left[0] == 0:
                return
            admin.execute("SELECT pg_sleep(0.01)")
    raise AssertionError("backends still alive")


async def test_every_idle_connection_killed_the_next_sessions_succeed() -> None:
    db = Database(_fresh_pg_url())
    try:
        old = await _backends(db, 4)
        _terminate(old)
        # Without the check the first session on a dead connection fails (the pool would
        # only notice the disconnect after the error, and invalidate then).
        for _ in range(6):
            async with db.session() as s:
                pid = int(await s.scalar(text("SELECT pg_backend_pid()")))
            assert pid not in old
    finally:
        await db.dispose()


async def test_a_live_idle_connection_is_kept() -> None:
    """The check must not throw good connections away (that would be a connect each time)."""
    db = Database(_fresh_pg_url())
    try:
        first = await _backends(db, 1)
        for _ in range(5):
            async with db.session() as s:
                pid = int(await s.scalar(text("SELECT pg_backend_pid()")))
            assert {pid} == first
    finally:
        await db.dispose()

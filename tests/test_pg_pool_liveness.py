"""A pooled Postgres connection the server closed while idle is replaced at checkout.

The pool does not ping on every checkout (a round trip each, ten per agent step): it looks
at the socket instead (`lomo/db/engine.py` `_drop_if_dead`). These tests close the pool's
connections from the server side, as a Postgres restart does, and require the next unit
of work to succeed on the first try.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import socket
import struct
from collections.abc import AsyncIterator

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from lomo.db.engine import Database
from tests.conftest import PG_ADMIN, _fresh_pg_url, _pg_available
from tests.helpers import free_port

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


class _VanishingHost:
    """A TCP proxy to Postgres whose far side can vanish without a word (a crashed host, a
    moved address): the pool's sockets stay open with nothing to read, and the next packet
    sent on one is answered with a reset."""

    def __init__(self) -> None:
        self.gone = False
        self.port = free_port()
        self._server: asyncio.Server | None = None

    async def _serve(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        sr, sw = await asyncio.open_connection("127.0.0.1", 5432)
        old = not self.gone  # made before the host vanished

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter, up: bool) -> None:
            while data := await r.read(65536):
                if up and self.gone and old:
                    sock = cw.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    cw.transport.abort()
                    sw.transport.abort()
                    return
                w.write(data)
                await w.drain()
            w.close()

        await asyncio.gather(pump(cr, sw, True), pump(sr, cw, False), return_exceptions=True)

    def vanish(self) -> None:
        self.gone = True  # connections made from now on are new ones: they work

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[_VanishingHost]:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        try:
            yield self
        finally:
            self._server.close()


async def _after_the_host_vanished(ping_after_idle_s: float) -> int:
    host = _VanishingHost()
    url = _fresh_pg_url().replace("127.0.0.1:5432", f"127.0.0.1:{host.port}")
    async with host.running():
        db = Database(url, ping_after_idle_s=ping_after_idle_s)
        try:
            async with db.session() as s:
                await s.scalar(text("SELECT 1"))
            host.vanish()
            await asyncio.sleep(0.2)  # idle for longer than the short bound below
            async with db.session() as s:
                return int(await s.scalar(text("SELECT 2")))
        finally:
            await db.dispose()


async def test_a_connection_whose_host_vanished_while_idle_is_replaced() -> None:
    assert await _after_the_host_vanished(ping_after_idle_s=0.05) == 2


async def test_without_the_idle_ping_the_vanished_host_fails_the_next_session() -> None:
    """The load above is real: a socket with nothing to read passes the look at it."""
    with pytest.raises(DBAPIError):
        await _after_the_host_vanished(ping_after_idle_s=3600)


async def test_connections_with_descriptors_above_1024_are_used() -> None:
    """`select` cannot watch descriptors numbered 1024 or more; an api with many open event
    streams has them, and every fresh connection must still be taken."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1300:
        pytest.skip(f"the descriptor limit ({hard}) is too low")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1300), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    db = Database(_fresh_pg_url())
    try:
        for _ in range(3):
            async with db.session() as s:
                assert await s.scalar(text("SELECT 1")) == 1
    finally:
        await db.dispose()
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


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

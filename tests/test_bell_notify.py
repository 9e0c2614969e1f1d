"""Events across api replicas on Postgres (lomo/bell_notify.py, migration 0014).

Each replica is a `lomo api` process of its own data directory (the one-host relay cannot
join them) with its streams' poll at two minutes: an event that reaches a stream within
`WAKE_S` came by the NOTIFY of the commit that wrote it, or by the re-read after the
listening session came back.
"""

from __future__ import annotations

import asyncio
import base64
from datetime import datetime
from typing import Any

import httpx
import psycopg
import pytest

from lomo.auth import create_user
from lomo.bell_notify import CHANNEL, conninfo
from lomo.db.engine import Database
from lomo.events import append_event
from tests.helpers import eventually
from tests.replica_support import SseReader, api_replica

pytestmark = pytest.mark.parametrize("db_url", ["postgres"], indirect=True)

# Far longer than a wake-up takes, far shorter than the replicas' poll (120 s).
WAKE_S = 30.0
LISTENERS = (
    "SELECT pid, backend_start FROM pg_stat_activity"
    " WHERE datname = current_database() AND application_name LIKE 'lomo-bell-%'"
)


async def _person(db: Database) -> tuple[str, str]:
    async with db.session() as s:
        user, token = await create_user(s, "ada")
    return user.id, token


async def _write(db: Database, user_id: str, n: int) -> None:
    """A worker's write: another process's commit, no relay, no bell of the replicas'."""
    async with db.session() as s:
        await append_event(s, user_id, "probe", {"n": n})


async def _listeners(url: str) -> list[tuple[int, datetime]]:
    async with await psycopg.AsyncConnection.connect(conninfo(url), autocommit=True) as c:
        cur = await c.execute(LISTENERS)
        return [(int(r[0]), r[1]) for r in await cur.fetchall()]


async def _until(check: Any, what: str) -> None:
    async def ok() -> bool:
        return bool(await check())

    try:
        await eventually(ok, within=WAKE_S, interval=0.02)
    except AssertionError as e:
        raise AssertionError(what) from e


async def test_a_commit_notifies_the_person_and_seq_and_a_rollback_nothing(
    db: Database, db_url: str
) -> None:
    user_id, _ = await _person(db)
    async with await psycopg.AsyncConnection.connect(conninfo(db_url), autocommit=True) as c:
        await c.execute(f"LISTEN {CHANNEL}")
        with pytest.raises(RuntimeError):
            async with db.session() as s:
                await append_event(s, user_id, "probe", {"n": 0})
                raise RuntimeError("rolled back")
        await _write(db, user_id, 1)
        await _write(db, user_id, 2)
        got = [n.payload async for n in c.notifies(timeout=WAKE_S, stop_after=2)]
    # The rolled-back event took no seq and sent nothing; the two commits one each.
    assert got == [f"{user_id} 1", f"{user_id} 2"]


async def test_an_event_reaches_a_stream_on_another_replica(
    tmp_path: Any, db: Database, db_url: str
) -> None:
    user_id, token = await _person(db)
    auth = {"Authorization": f"Bearer {token}"}
    with api_replica(tmp_path, "a", db_url) as a, api_replica(tmp_path, "b", db_url) as b:
        await _until(lambda: _count_is(db_url, 2), "both replicas listen")
        async with SseReader(b, token) as on_b, SseReader(a, token) as on_a:
            # A request served by replica A writes an event: B's client sees it.
            content = {"media_type": "image/png", "data_base64": base64.b64encode(b"png").decode()}
            body = {"type": "asset", "name": "p", "content": content}
            async with httpx.AsyncClient(timeout=30) as http:
                r = await http.post(f"{a}/v1/objects", json=body, headers=auth)
            assert r.status_code in (200, 201), r.text
            await _until(lambda: _has(on_b, 1), "replica A's event on replica B")
            # A worker's commit (neither replica's) reaches both.
            await _write(db, user_id, 2)
            await _until(lambda: _has(on_b, 2), "the worker's event on replica B")
            await _until(lambda: _has(on_a, 2), "the worker's event on replica A")
            assert on_b.seqs == on_a.seqs == [1, 2]


async def test_events_written_while_the_listener_is_down_arrive_after_it_reconnects(
    tmp_path: Any, db: Database, db_url: str
) -> None:
    user_id, token = await _person(db)
    with api_replica(tmp_path, "b", db_url) as b:
        await _until(lambda: _count_is(db_url, 1), "the replica listens")
        async with SseReader(b, token) as stream:
            await _write(db, user_id, 1)
            await _until(lambda: _has(stream, 1), "the first event")
            [(old_pid, _)] = await _listeners(db_url)
            async with await psycopg.AsyncConnection.connect(
                conninfo(db_url), autocommit=True
            ) as c:
                await c.execute("SELECT pg_terminate_backend(%s)", (old_pid,))
                for n in (2, 3, 4):
                    await _write(db, user_id, n)
                written = (await (await c.execute("SELECT clock_timestamp()")).fetchone())[0]  # type: ignore[index]
            await _until(lambda: _has(stream, 4), "the events of the outage")
            [(new_pid, started)] = await _listeners(db_url)
            # The new session began after the last of them was committed: no session heard
            # their NOTIFY, the re-read after reconnecting brought them.
            assert new_pid != old_pid and started > written
            await _write(db, user_id, 5)
            await _until(lambda: _has(stream, 5), "an event after the reconnect")
            await asyncio.sleep(0.5)  # a second delivery of any of them would show by now
            assert stream.seqs == [1, 2, 3, 4, 5]


async def _count_is(url: str, n: int) -> bool:
    return len(await _listeners(url)) == n


async def _has(reader: SseReader, seq: int) -> bool:
    return seq in reader.seqs

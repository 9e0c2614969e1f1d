"""Session fixtures: a real Temporal dev server, real Postgres (and SQLite), migrated DBs."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

# As cli/main.py does, before anything loads numpy: the api, worker and simulator share
# this process here, and OpenBLAS's fork handler hung the simulator's ffmpeg spawn while a
# vector search ran on another thread.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The offline model's replies arrive whole in the suite; the streaming tests pace them.
os.environ.setdefault("LOMO_OFFLINE_STREAM_CHARS_PER_SECOND", "0")

import psycopg
import pytest
from temporalio.client import Client

from lomo.db.engine import Database
from lomo.db.migrate import upgrade
from lomo.temporal import start_dev_server
from tests.helpers import free_port
from tests.web_support import chromium

CONTINUE_AS_NEW_KEY = "limit.historyCount.suggestContinueAsNew"
CONTINUE_AS_NEW_AFTER_EVENTS = 400
log = logging.getLogger(__name__)
PG_ADMIN = os.environ.get("LOMO_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def _pg_available() -> bool:
    try:
        with psycopg.connect(PG_ADMIN, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("temporal") / "temporal.log"
    # Temporal suggests continue-as-new early here, so every long-lived workflow in the
    # suite rolls over with its compact state (the production default is thousands).
    proc = start_dev_server(
        None, "127.0.0.1", port, None, log, {CONTINUE_AS_NEW_KEY: CONTINUE_AS_NEW_AFTER_EVENTS}
    )
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"temporal dev server did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=15)


@pytest.fixture
async def temporal_client(temporal_server: str) -> Client:
    # Search attributes are registered by the dev server at start; connecting can race the
    # namespace becoming ready, so retry briefly.
    for _ in range(50):
        try:
            return await Client.connect(temporal_server)
        except RuntimeError:
            await asyncio.sleep(0.2)
    raise RuntimeError("cannot connect to temporal")


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex[:10]}"


def _fresh_pg_url() -> str:
    name = f"lomo_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN.rsplit("/", 1)[0]
    return f"{base.replace('postgresql://', 'postgresql+psycopg://')}/{name}"


def _drop_pg(url: str) -> None:
    """Drop a test's database once it is done (every Postgres test made one and left it:
    hundreds piled up on a developer's server). FORCE ends what still holds a connection;
    a failure leaves the database behind instead of failing the test."""
    name = url.rsplit("/", 1)[1]
    try:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except psycopg.Error as e:
        log.warning("test database %s left behind: %r", name, e)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'lomo.db'}"
    else:
        if not _pg_available():
            if os.environ.get("CI") == "true":
                pytest.fail("Postgres is unreachable under CI=true")
            pytest.skip("Postgres not reachable")
        url = _fresh_pg_url()
    upgrade(url)
    yield url
    if request.param == "postgres":
        _drop_pg(url)


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    d = Database(db_url)
    yield d
    await d.dispose()


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium for one module's web tests (started only where a test asks)."""
    with chromium() as b:
        yield b

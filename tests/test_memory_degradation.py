"""A slow or failing memory service never fails a step: retrieval is bounded by
`memory_timeout_seconds`, never raises, and says why memory is missing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client

from lomo.db.engine import Database
from memory.context import memory_for_context
from memory.services import MemoryServices, install_services
from standin.intents import recogniser
from tests.helpers import free_port
from tests.memory_support import (
    Env,
    context_text,
    extracted,
    finished_task,
    make_env,
    post,
    start_memory_service,
    wait_extracted,
)
from tests.stack import running_stack
from tools.base import ToolDeps
from vectors import VectorHit, VectorIndex, VectorPoint
from vectors.base import VectorFilter

# Generous: the bound is what is tested (against a 30 s database and a hanging index), and
# under the parallel suite the healthy profile read alone once took longer than 0.3 s, so
# the index was never reached (a session-12 CI run).
TIMEOUT = 2.0


class BrokenIndex(VectorIndex):
    """A vector index that is down (raises) or hangs (never answers)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls = 0

    async def _fail(self) -> None:
        self.calls += 1
        if self.mode == "hang":
            await asyncio.sleep(3600)
        raise ConnectionError("qdrant unreachable")

    async def ensure_collection(
        self, name: str, dim: int, keyword_fields: Sequence[str] = ()
    ) -> None:
        await self._fail()

    async def upsert(self, name: str, points: Sequence[VectorPoint]) -> None:
        await self._fail()

    async def search(
        self,
        name: str,
        vector: Sequence[float],
        limit: int,
        filter: VectorFilter | None = None,
        exact: bool = False,
    ) -> list[VectorHit]:
        await self._fail()
        return []

    async def delete(self, name: str, ids: Sequence[str]) -> None:
        await self._fail()

    async def delete_where(self, name: str, filter: VectorFilter) -> None:
        await self._fail()

    async def count(self, name: str, filter: VectorFilter | None = None) -> int:
        await self._fail()
        return 0


class SlowDatabase(Database):
    """Every session start waits `delay` seconds first (a DB under lock or overload)."""

    def __init__(self, url: str, delay: float) -> None:
        super().__init__(url)
        self.delay = delay

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        await asyncio.sleep(self.delay)
        async with super().session() as s:
            yield s


@pytest.fixture
async def env(db: Database, tmp_path: Path) -> AsyncIterator[Env]:
    e = await make_env(db, tmp_path)
    await e.say("Our brand's main colour is blue.")  # a profile exists to be served
    e.deps.settings.memory_timeout_seconds = TIMEOUT
    yield e
    await e.services.index.close()
    await e.deps.http.aclose()


def _break(env: Env, mode: str) -> BrokenIndex:
    broken = BrokenIndex(mode)
    install_services(env.settings, MemoryServices(broken, env.services.embedder))
    return broken


@pytest.mark.parametrize("mode", ["raise", "hang"])
async def test_vector_index_down_gives_profile_only(env: Env, mode: str) -> None:
    broken = _break(env, mode)
    start = time.monotonic()
    ctx = await memory_for_context(env.deps, env.user_id, "tsk_1", "brand colours")
    elapsed = time.monotonic() - start
    assert broken.calls == 1
    assert elapsed < TIMEOUT + 0.5  # bounded, not the hang's hour
    assert ctx.items == [] and ctx.profile_version == 1 and "blue" in ctx.profile_text
    expected = "timed out" if mode == "hang" else "unavailable (ConnectionError)"
    assert ctx.degraded is not None and expected in ctx.degraded


async def test_slow_database_gives_no_memory_within_the_bound(env: Env, db_url: str) -> None:
    slow = SlowDatabase(db_url, delay=30.0)
    deps = ToolDeps(slow, env.deps.http, env.deps.assets, env.settings)
    start = time.monotonic()
    ctx = await memory_for_context(deps, env.user_id, "tsk_1", "brand colours")
    assert time.monotonic() - start < TIMEOUT + 0.5
    assert ctx.degraded is not None and "timed out" in ctx.degraded
    assert (ctx.profile_version, ctx.profile_text, ctx.items) == (0, "", [])
    await slow.dispose()


async def test_database_gone_gives_no_memory(env: Env, tmp_path: Path) -> None:
    gone = Database(f"sqlite+aiosqlite:///{tmp_path}/missing/dir/x.db")
    deps = ToolDeps(gone, env.deps.http, env.deps.assets, env.settings)
    ctx = await memory_for_context(deps, env.user_id, "tsk_1", "brand")
    assert ctx.degraded is not None and "unavailable" in ctx.degraded
    await gone.dispose()


async def test_healthy_service_is_not_degraded(env: Env) -> None:
    ctx = await memory_for_context(env.deps, env.user_id, "tsk_1", "brand colours")
    assert ctx.degraded is None and ctx.profile_version == 1


@pytest.mark.parametrize("service", ["not started", "killed"])
async def test_memory_service_down_never_fails_the_task(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    service: str,
) -> None:
    """Workers reach memory through `lomo memory`: with that process never started, or
    SIGKILLed after it served, a picture request still completes (routing by keywords,
    the step without memory and saying why), and a message said meanwhile is extracted once
    the service is back."""
    # The offline model's intent recogniser loads its embedder on first use, blocking the
    # worker's loop for many seconds on a cold process: loaded first, off the loop.
    await asyncio.to_thread(recogniser)
    port = free_port()
    proc = None
    if service == "killed":
        proc = start_memory_service(tmp_path / "memory", db_url, port)
    try:
        async with running_stack(
            tmp_path,
            db_url,
            temporal_server,
            temporal_client,
            task_queue,
            embedder="fake",
            memory_url=f"http://127.0.0.1:{port}",
            memory_timeout_seconds=0.5,
            memory_retry_seconds=1.0,
        ) as st:
            if proc is not None:
                await wait_extracted(st, await post(st, "Our brand's main colour is blue."))
                proc.kill()  # SIGKILL: no goodbye, the port just stops answering
                proc.wait()
            said = await post(st, "I prefer cream white backgrounds.")
            task = await finished_task(st, await post(st, "Generate an image of a red cat"))
            assert task["status"] == "completed", task
            assert len(task["artifacts"]) == 1, task
            assert "[runtime] degraded: memory:" in await context_text(st, task["task_id"])
            assert not await extracted(st, said)
            proc = start_memory_service(tmp_path / "memory", db_url, port)
            await wait_extracted(st, said, within=90)  # the MemoryWorkflow's later round
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()

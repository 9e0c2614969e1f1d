"""Unclear submits against an upstream that honours idempotency keys (the simulator; the
default `generation_upstream_idempotent=True`): the submit is sent again with the same key
and the job the upstream made is adopted. One job, charged once, nothing refunded, the
result collected. Each attempt runs as Temporal would run the `run_tool` activity: an
attempt that raised (or died) runs again with the same call_id. The refund rule of an
upstream without idempotency keys: tests/test_money_faults.py, tests/test_money_kill.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import select

from activities.generation import GenerationActivities
from activities.types import OrderRef
from lomo.db.engine import Database
from lomo.db.models import GenerationOrder
from tests.helpers import eventually
from tests.test_money import Money, money_env
from tools import generation
from tools.base import ToolCallContext
from tools.generation import GenerateTool


class Killed(BaseException):
    """The worker process dying (os._exit): nothing after it runs, nothing catches it."""


# Short, so the tests wait past it quickly; not shorter: under the full suite's load on two
# cores a 0.5 s timeout expired on the first, normal POST to the simulator (seen on CI).
SUBMIT_TIMEOUT = 1.5


@pytest.fixture
async def money(tmp_path: Path, db_url: str, temporal_server: str) -> AsyncIterator[Money]:
    # A short submit timeout: without the resend, the refund rule fails the order fast.
    async with money_env(
        tmp_path, db_url, temporal_server, generation_submit_timeout_seconds=SUBMIT_TIMEOUT
    ) as m:
        assert m.settings.generation_upstream_idempotent  # the default
        yield m


async def _killed_after_the_post(m: Money, monkeypatch: pytest.MonkeyPatch) -> ToolCallContext:
    """The first attempt dies right after the upstream POST returned (the test hook
    LOMO_FAULT_KILL_AFTER_SUBMIT): the vendor has the job, the order has no job id."""

    def die(code: int) -> None:
        raise Killed(code)

    monkeypatch.setattr(generation.os, "_exit", die)
    ctx = m.ctx()
    killed = m.settings.model_copy(update={"fault_kill_after_submit": True})
    with pytest.raises(Killed):
        tool = GenerateTool(replace(m.deps(), settings=killed), "image")
        await tool.run(ctx, {"prompt": "a cat"})
    async with m.db.session() as s:
        o = await s.scalar(select(GenerationOrder))
        assert o is not None and o.upstream_job_id is None and o.submit_started_at is not None
    assert len(await m.jobs()) == 1
    assert await m.entries() == [("deposit", 2000), ("reserve", 4)]
    return ctx


async def _adopted_collected_charged_once(m: Money, order_id: str) -> None:
    (job,) = await m.jobs()  # one job at the vendor for the key, never a second
    assert job["job_id"] and await m.count(GenerationOrder) == 1
    async with m.db.session() as s:
        o = await s.get(GenerationOrder, order_id)
        assert o is not None and o.upstream_job_id == job["job_id"]
    assert await m.settled(order_id) == "succeeded"
    await GenerationActivities(m.deps()).collect_generation(OrderRef(order_id))
    async with m.db.session() as s:
        o = await s.get(GenerationOrder, order_id, populate_existing=True)
        assert o is not None and o.object_id, "the job the vendor made is the task's artifact"
    assert len(await m.jobs()) == 1
    assert await m.entries() == [("deposit", 2000), ("reserve", 4), ("settle", 4)]
    assert await m.account() == (1996, 0, 4, 2000)


async def test_killed_after_the_post_two_racing_retries_adopt_the_one_job(
    money: Money, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = await _killed_after_the_post(money, monkeypatch)
    await asyncio.sleep(SUBMIT_TIMEOUT + 0.1)  # past it: the refund rule would fail it now
    # The old worker's attempt and the new worker's, at once, each on its own connections.
    dbs = [Database(money.settings.resolved_database_url) for _ in range(2)]
    try:
        results = await asyncio.gather(
            *(GenerateTool(money.deps(db), "image").run(ctx, {"prompt": "a cat"}) for db in dbs)
        )
    finally:
        for db in dbs:
            await db.dispose()
    assert [r.status for r in results] == ["done", "done"], [r.result for r in results]
    assert results[0].order_id == results[1].order_id
    assert results[0].order_id is not None
    await _adopted_collected_charged_once(money, results[0].order_id)


async def test_killed_after_the_post_the_compensating_poll_adopts_the_job(
    money: Money, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The poll, too, asks the upstream with the key instead of failing the order by time
    (an order it waits on whose id is missing: a retry that lost a race to a stale one)."""
    await _killed_after_the_post(money, monkeypatch)
    await asyncio.sleep(SUBMIT_TIMEOUT + 0.1)  # past the submit timeout
    async with money.db.session() as s:
        o = await s.scalar(select(GenerationOrder))
        assert o is not None
        order_id = o.id
    st = await GenerationActivities(money.deps()).poll_generation(OrderRef(order_id))
    assert st.status != "failed"
    await _adopted_collected_charged_once(money, order_id)


async def test_submit_timeout_is_sent_again_with_the_key_and_the_job_adopted(
    money: Money,
) -> None:
    # The vendor creates the job, then answers too late (after our SUBMIT_TIMEOUT).
    await money.sim.post(
        "/sim/faults", json={"submit_timeout_after_create": True, "submit_timeout_seconds": 3}
    )
    ctx = money.ctx()
    # The lookup by key is refused (a wrong account key), so the job is not found at once:
    # the attempt raises and Temporal retries the call (found: tests/test_cancel.py).
    real = money.settings
    money.settings = real.model_copy(update={"sim_token": SecretStr("wrong")})
    with pytest.raises(httpx.TimeoutException):
        await money.image(ctx)  # unclear: the attempt raises, Temporal retries the call
    money.settings = real

    # The job's signed report names the order by its key: the order adopts the job from
    # it before the call's next attempt, instead of waiting for that attempt or a poll.
    async def adopted() -> GenerationOrder | None:
        async with money.db.session() as s:
            o = await s.scalar(select(GenerationOrder))
            return o if o is not None and o.upstream_job_id else None

    await eventually(adopted, within=20)
    assert ("refund", 4) not in await money.entries()
    res = await money.image(ctx)  # the next attempt: the job id is there, nothing is sent
    assert res.status == "done" and res.order_id, res.result
    await _adopted_collected_charged_once(money, res.order_id)

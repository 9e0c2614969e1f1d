"""The DB goes away at the exact points of a generation order where a scenario run on a
crashing Postgres lost a draft: the upstream POST returned a job id and the DB could not
store it. Each attempt runs as Temporal would run the `run_tool` activity (retried after
an error with the same call_id); the compensating poll and the collection run after it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError
from temporalio.client import Client

from activities.generation import GenerationActivities
from activities.types import OrderRef
from api.services import callbacks
from lomo.db.models import GenerationOrder
from tests.stack import running_stack
from tests.test_money import Money, money_env
from tests.test_slice import run_cat_slice
from tools import generation
from tools.base import ToolResult


def _outage(what: str) -> OperationalError:
    # What asyncpg reports through SQLAlchemy while Postgres restarts after a crash.
    refused = ConnectionRefusedError("the database system is starting up")
    return OperationalError(what, None, refused)


async def _like_temporal(call: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
    """The activity's retries: an attempt that raised runs again with the same call_id."""
    for _ in range(20):
        try:
            return await call()
        except OperationalError:
            await asyncio.sleep(0.2)
    raise AssertionError("the call never finished")


async def test_job_id_returned_while_the_db_is_down_is_kept_and_collected(
    tmp_path: Path, db_url: str, temporal_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A short unclear-submit limit so that, without the fix, the poll fails the order fast
    # (the refund rule of an upstream without idempotency keys; an idempotent one would
    # get the id again by resending the key).
    async with money_env(
        tmp_path,
        db_url,
        temporal_server,
        generation_submit_timeout_seconds=0.5,
        generation_upstream_idempotent=False,
    ) as m:
        real = generation.record_job_id
        down = {"left": 3}  # the DB refuses the next three writes of a job id

        async def record_while_down(s: Any, order_id: str, job_id: str) -> None:
            if down["left"]:
                down["left"] -= 1
                raise _outage("UPDATE generation_orders SET upstream_job_id")
            await real(s, order_id, job_id)

        monkeypatch.setattr(generation, "record_job_id", record_while_down)
        ctx = m.ctx()
        res = await _like_temporal(lambda: m.image(ctx))
        assert res.status == "done" and res.order_id, res
        # The task waits on the order: its poll (and the callbacks) settle it.
        assert await _settled(m, res.order_id) == "succeeded"
        (job,) = await m.jobs()
        assert job["status"] == "succeeded"
        acts = GenerationActivities(m.deps())
        await acts.collect_generation(OrderRef(res.order_id))
        async with m.db.session() as s:
            o = await s.get(GenerationOrder, res.order_id)
            assert o is not None
            assert o.upstream_job_id == job["job_id"]
            assert o.object_id, "the job the vendor finished is an artifact of its task"
        assert await m.entries() == [("deposit", 2000), ("reserve", 4), ("settle", 4)]
        assert down["left"] == 0


async def _settled(m: Money, order_id: str) -> str:
    """Callbacks plus the compensating poll, as the task workflow does, for a few seconds
    past the unclear-submit limit."""
    acts = GenerationActivities(m.deps())
    for _ in range(60):
        await acts.poll_generation(OrderRef(order_id))
        async with m.db.session() as s:
            o = await s.get(GenerationOrder, order_id)
            assert o is not None
            if o.status in ("succeeded", "failed"):
                return o.status
        await asyncio.sleep(0.1)
    return "open"


async def test_job_id_is_stored_even_when_the_attempt_is_cancelled_meanwhile(
    tmp_path: Path, db_url: str, temporal_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dev-server restart times the attempt out; the SDK cancels it on its next heartbeat,
    here while it waits for the DB to store the job id. The id it holds is still stored,
    so the retry and the poll find the job instead of failing the order as unclear."""
    async with money_env(
        tmp_path,
        db_url,
        temporal_server,
        generation_submit_timeout_seconds=2,
        generation_upstream_idempotent=False,  # the refund rule: the strict case
    ) as m:
        real = generation.record_job_id
        down = {"left": 2}
        refused = asyncio.Event()

        async def record_while_down(s: Any, order_id: str, job_id: str) -> None:
            if down["left"]:
                down["left"] -= 1
                refused.set()
                raise _outage("UPDATE generation_orders SET upstream_job_id")
            await real(s, order_id, job_id)

        monkeypatch.setattr(generation, "record_job_id", record_while_down)
        ctx = m.ctx()
        first = asyncio.create_task(m.image(ctx))
        await refused.wait()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        res = await _like_temporal(lambda: m.image(ctx))  # Temporal's next attempt
        assert res.status == "done" and res.order_id, res
        assert await _settled(m, res.order_id) == "succeeded"
        (job,) = await m.jobs()
        async with m.db.session() as s:
            o = await s.get(GenerationOrder, res.order_id)
            assert o is not None and o.upstream_job_id == job["job_id"]
        assert await m.entries() == [("deposit", 2000), ("reserve", 4), ("settle", 4)]


async def test_callbacks_refused_while_the_db_is_down_are_covered_by_the_poll(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hypothesis for the lost draft, ruled out: every callback reaches the api while the
    DB is down (500; the simulator does not retry a callback). The task's timer polls the
    vendor and collects the job all the same. A guard for that fallback: without the poll
    in TaskWorkflow's wait the task never completes and this fails."""
    refused: list[str] = []

    async def db_down(*a: Any, **kw: Any) -> tuple[bool, bool]:
        refused.append("callback")
        raise _outage("UPDATE generation_orders SET status")

    monkeypatch.setattr(callbacks, "record_job_state", db_down)
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        generation_wait_seconds=1.0,
    ) as st:
        task = await run_cat_slice(st, "Generate an image of a red tabby cat")
        assert len(task["artifacts"]) == 1
        (job,) = (await st.sim.get("/jobs")).json()["jobs"]
        assert job["status"] == "succeeded"
        assert refused, "no callback reached the api"

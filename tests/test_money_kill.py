"""A real `lomo worker` process dies (os._exit(137), the test-only fault hook
LOMO_FAULT_KILL_AFTER_SUBMIT) right after the upstream POST returned and before the job id
was persisted. A new worker takes the call over (heartbeat timeout). Against an upstream
that honours idempotency keys (the default) it sends the key again and adopts the job:
collected, charged once. Against one that does not, by the refund rule the unclear submit
is failed and refunded, never resubmitted. Either way one upstream job, one order, the
ledger exact to the cent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.client import Client

from lomo.db.models import GenerationOrder, ToolCall
from money.orders import UNCLEAR_SUBMIT
from standin.server import create_standin_app
from tests.helpers import ThreadServer, eventually
from tests.runtime_support import (
    Workers,
    call_then_report,
    last_tool_results,
    standin_worker_env,
    start_task,
)
from tests.test_money import Money, money_env

pytestmark = pytest.mark.slow


@dataclass
class Killed:
    m: Money
    responder: Any
    task_id: str


@asynccontextmanager
async def killed_after_the_post(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    idempotent: bool,
) -> AsyncIterator[Killed]:
    """Worker 1 dies after the POST; worker 2 takes the call over and the task ends."""
    responder = call_then_report(
        "generate_image", {"prompt": "poster draft"}, "toolu_gen_1", "Seen: "
    )
    async with money_env(
        tmp_path, db_url, temporal_server, generation_upstream_idempotent=idempotent
    ) as m:
        with ThreadServer(create_standin_app(responder)) as model_server:
            env = standin_worker_env(
                tmp_path,
                db_url,
                temporal_server,
                task_queue,
                model_server.url,
                LOMO_SIM_URL=m.settings.resolved_sim_url,
                LOMO_API_URL=m.settings.resolved_api_url,
                LOMO_GENERATION_SUBMIT_TIMEOUT_SECONDS="1",
                LOMO_GENERATION_UPSTREAM_IDEMPOTENT="1" if idempotent else "0",
            )
            with Workers(env, tmp_path) as workers:
                first = workers.spawn("worker1", LOMO_FAULT_KILL_AFTER_SUBMIT="1")
                task_id, handle = await start_task(
                    temporal_client,
                    m.db,
                    task_queue,
                    m.user_id,
                    "make a poster draft",
                    heartbeat_timeout_seconds=2,
                    generation_wait_seconds=1,
                )
                code = await asyncio.to_thread(first.wait, 60)
                assert code == 137, (tmp_path / "worker1.log").read_text()[-2000:]
                # Died after the POST: the upstream has the job, we have no job id.
                assert len(await m.jobs()) == 1
                async with m.db.session() as s:
                    order = await s.scalar(select(GenerationOrder))
                    assert order is not None and order.upstream_job_id is None
                    assert order.submit_started_at is not None and order.status == "created"
                assert await m.entries() == [("deposit", 2000), ("reserve", 4)]
                workers.spawn("worker2")
                assert await handle.result() == "completed"
        yield Killed(m, responder, task_id)


async def test_worker_killed_after_the_post_the_retry_adopts_the_job(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
) -> None:
    async with killed_after_the_post(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, idempotent=True
    ) as k:
        m = k.m
        async with m.db.session() as s:
            order = await s.scalar(select(GenerationOrder))
            call = await s.get(ToolCall, f"{k.task_id}:1:1:0")
        (job,) = await m.jobs()  # the key sent again made no second job
        assert order is not None and order.upstream_job_id == job["job_id"]
        assert (order.status, order.error) == ("succeeded", None)
        assert order.object_id, "the job the vendor made is the task's artifact"
        assert call is not None and call.status == "done"
        assert await m.count(GenerationOrder) == 1
        assert await m.entries() == [("deposit", 2000), ("reserve", 4), ("settle", 4)]
        assert await m.account() == (1996, 0, 4, 2000)


async def test_worker_killed_after_the_post_is_refunded_by_a_non_idempotent_upstream(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
) -> None:
    async with killed_after_the_post(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, idempotent=False
    ) as k:
        m, responder = k.m, k.responder
        async with m.db.session() as s:
            order = await s.scalar(select(GenerationOrder))
            call = await s.get(ToolCall, f"{k.task_id}:1:1:0")
        assert order is not None and (order.status, order.error) == ("failed", UNCLEAR_SUBMIT)
        assert call is not None and call.status == "error"
        assert UNCLEAR_SUBMIT in last_tool_results(responder.requests[-1])[0]
        # Let the orphaned upstream job run to its end; its callbacks change nothing.
        await eventually(lambda: _all_finished(m), within=20)
        assert len(await m.jobs()) == 1 and await m.count(GenerationOrder) == 1
        assert await m.entries() == [("deposit", 2000), ("reserve", 4), ("refund", 4)]
        assert await m.account() == (2000, 0, 0, 2000)


async def _all_finished(m: object) -> bool:
    jobs = await m.jobs()  # type: ignore[attr-defined]
    return bool(jobs) and all(j["status"] in ("succeeded", "failed") for j in jobs)

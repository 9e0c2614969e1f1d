"""A real `lomo worker` process dies (os._exit(137), the test-only fault hook
LOMO_FAULT_KILL_AFTER_SUBMIT) right after the upstream POST returned and before the job id
was persisted. A new worker takes the call over (heartbeat timeout): by the stated rule the
unclear submit is failed and refunded, never resubmitted. One upstream job, one order, the
ledger exact to the cent."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import select
from temporalio.client import Client

from llm.standin.server import create_standin_app
from lomo.db.models import GenerationOrder, ToolCall
from money.orders import UNCLEAR_SUBMIT
from tests.helpers import ThreadServer, eventually
from tests.runtime_support import (
    Workers,
    call_then_report,
    last_tool_results,
    standin_worker_env,
    start_task,
)
from tests.test_money import money_env

pytestmark = pytest.mark.slow


async def test_worker_killed_between_submit_and_persisting_the_job_id(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
) -> None:
    responder = call_then_report(
        "generate_image", {"prompt": "poster draft"}, "toolu_gen_1", "Seen: "
    )
    async with money_env(tmp_path, db_url, temporal_server) as m:
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
        async with m.db.session() as s:
            order = await s.scalar(select(GenerationOrder))
            call = await s.get(ToolCall, f"{task_id}:1:1:0")
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

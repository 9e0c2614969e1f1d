"""A worker process is SIGKILLed while it collects a finished job (the test-only hook
LOMO_FAULT_HANG_IN_COLLECT holds `collect_generation` before its download). The collection
heartbeats, so Temporal hands it to a second worker after the heartbeat timeout, long
before the activity's two-minute start-to-close timeout would have run out."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowHandle

from lomo.db.models import GenerationOrder
from standin.server import create_standin_app
from tests.helpers import ThreadServer, eventually
from tests.runtime_support import Workers, call_then_report, kill, standin_worker_env, start_task
from tests.test_money import Money, money_env
from workflows.task import TOOL_TIMEOUT

pytestmark = pytest.mark.slow

HEARTBEAT_S = 5  # a loaded machine must not miss a beat of the live first worker
# A second worker starts (a few seconds) and the retry waits its one-second back-off.
MARGIN_S = 45


async def _collecting(handle: WorkflowHandle[object, object]) -> bool:
    desc = await handle.describe()
    return any(
        a.activity_type.name == "collect_generation"
        and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        for a in desc.raw_description.pending_activities
    )


async def _collected(m: Money) -> str | None:
    async with m.db.session() as s:
        order = await s.scalar(select(GenerationOrder))
        return order.object_id if order is not None else None


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # one backend: slow
async def test_worker_killed_mid_collect_is_taken_over_after_the_heartbeat_timeout(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    assert TOOL_TIMEOUT.total_seconds() > 2 * (HEARTBEAT_S + MARGIN_S)  # unmistakable
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
            )
            with Workers(env, tmp_path) as workers:
                first = workers.spawn("worker1", LOMO_FAULT_HANG_IN_COLLECT="1")
                _, handle = await start_task(
                    temporal_client,
                    m.db,
                    task_queue,
                    m.user_id,
                    "make a poster draft",
                    heartbeat_timeout_seconds=HEARTBEAT_S,
                    generation_wait_seconds=1,
                )
                await eventually(lambda: _collecting(handle), within=90, interval=0.5)
                kill(first)
                killed_at = time.monotonic()
                workers.spawn("worker2")
                await eventually(lambda: _collected(m), within=HEARTBEAT_S + MARGIN_S)
                took = time.monotonic() - killed_at
                print(f"collection taken over {took:.1f} s after the kill")
                assert await handle.result() == "completed"
    assert took < HEARTBEAT_S + MARGIN_S, took
    attempts = [
        e.activity_task_started_event_attributes.attempt
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert 2 in attempts, "the collection was not retried after the kill"

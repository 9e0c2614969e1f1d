"""A worker process is SIGKILLed while it routes a message (the test-only hook
LOMO_FAULT_HANG_IN_ROUTE holds `route_message` before it routes). The routing heartbeats,
so Temporal hands it to a second worker after the heartbeat timeout, long before the
activity's two-minute start-to-close timeout would have run out."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowHandle

from api.dispatch.tasks import route_via_main
from lomo.contracts import main_thread as main_contract
from lomo.db.engine import Database
from lomo.db.models import MessageRow
from lomo.ids import new_id
from tests.helpers import eventually
from tests.runtime_support import Workers, kill, new_user, worker_env
from tests.test_money import money_env

pytestmark = pytest.mark.slow

HEARTBEAT_S = 5  # a loaded machine must not miss a beat of the live first worker
MARGIN_S = 45  # a second worker starts (a few seconds), the retry waits its back-off
ROUTE_TIMEOUT_S = 120  # the activity's start-to-close (workflows/main_thread.py)


async def _routing(handle: WorkflowHandle[object, object]) -> bool:
    desc = await handle.describe()
    return any(
        a.activity_type.name == "route_message"
        and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        for a in desc.raw_description.pending_activities
    )


async def _routed_to(db: Database, message_id: str) -> str | None:
    async with db.session() as s:
        row = await s.get(MessageRow, message_id)
        return row.task_id if row is not None else None


async def _store(db: Database, user_id: str, text: str) -> str:
    async with db.session() as s:
        mid = new_id("msg")
        s.add(MessageRow(id=mid, user_id=user_id, text=text))
        return mid


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # one backend: slow
async def test_worker_killed_mid_routing_is_taken_over_after_the_heartbeat_timeout(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    assert ROUTE_TIMEOUT_S > 2 * (HEARTBEAT_S + MARGIN_S)  # unmistakable
    async with money_env(
        tmp_path, db_url, temporal_server, heartbeat_timeout_seconds=HEARTBEAT_S
    ) as m:
        settings = m.settings.model_copy(update={"task_queue": task_queue})
        user_id = await new_user(m.db)
        env = worker_env(
            tmp_path,
            db_url,
            temporal_server,
            task_queue,
            LOMO_MODEL_PROVIDER="offline",
            LOMO_SIM_URL=m.settings.resolved_sim_url,
            LOMO_API_URL=m.settings.resolved_api_url,
        )
        with Workers(env, tmp_path) as workers:
            first = workers.spawn("worker1", LOMO_FAULT_HANG_IN_ROUTE="1")
            message_id = await _store(m.db, user_id, "Generate an image of a lighthouse at dusk")
            await route_via_main(temporal_client, settings, user_id, message_id)
            handle = temporal_client.get_workflow_handle(main_contract.workflow_id(user_id))
            await eventually(lambda: _routing(handle), within=90, interval=0.5)
            kill(first)
            killed_at = time.monotonic()
            workers.spawn("worker2")
            await eventually(lambda: _routed_to(m.db, message_id), within=HEARTBEAT_S + MARGIN_S)
            took = time.monotonic() - killed_at
            print(f"routing taken over {took:.1f} s after the kill")
    assert took < HEARTBEAT_S + MARGIN_S, took
    attempts = [
        e.activity_task_started_event_attributes.attempt
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert 2 in attempts, "the routing was not retried after the kill"

"""Safe deploys with Temporal Worker Versioning: a running stack moves to a worker build
whose TaskWorkflow changed while tasks are parked on the person's price cards. The parked
runs stay pinned to the build they started on and finish there; a new task starts on the
new build; no workflow task fails anywhere (a run replayed on the changed build would fail
with nondeterminism and stay stuck)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from cli.deploy import builds, set_current
from lomo.db.models import Card
from tests.helpers import eventually, free_port
from tests.memory_support import start_memory_service
from tests.runtime_support import Workers, worker_env
from tests.stack import Stack, running_stack

pytestmark = pytest.mark.slow

CHANGED = ("tests.versioned_build",)


async def _parked_on_price_card(st: Stack, text: str) -> tuple[str, str]:
    """Sends a request; returns (task id, card id) once the task waits on its price card."""
    r = await st.api.post("/v1/messages", json={"text": text}, headers=st.auth)
    mid = r.json()["message_id"]

    async def card() -> Any:
        m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
        if not (tid := m["routing"].get("task_id")):
            return None
        async with st.db.session() as s:
            c = await s.scalar(
                select(Card).where(Card.task_id == tid, Card.kind == "price", Card.status == "open")
            )
        return (tid, c.id) if c is not None else None

    found: tuple[str, str] = await eventually(card, within=120)
    return found


async def _build_of(client: Client, task_id: str) -> str:
    d = await client.get_workflow_handle(f"task:{task_id}").describe()
    info = d.raw_description.workflow_execution_info.versioning_info
    return str(info.deployment_version.build_id)


async def _event_types(client: Client, task_id: str) -> list[str]:
    history = await client.get_workflow_handle(f"task:{task_id}").fetch_history()
    return [EventType.Name(e.event_type) for e in history.events]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # one backend: slow
async def test_parked_runs_finish_on_their_build_and_new_runs_take_the_new_one(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    deployment = f"lomo-{task_queue}"
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        in_process_worker=False,
        free_confirm_cents=0,  # every image asks its price
        daily_free_cents=0,
    ) as st:
        # Two worker builds share one vector index only through the memory service.
        memory_port = free_port()
        memory = start_memory_service(tmp_path, db_url, memory_port)
        env = worker_env(
            tmp_path,
            db_url,
            temporal_server,
            task_queue,
            LOMO_API_PORT=str(st.settings.api_port),
            LOMO_SIM_PORT=str(st.settings.sim_port),
            LOMO_MODEL_PROVIDER="offline",
            LOMO_DEPLOYMENT_NAME=deployment,
            LOMO_FREE_CONFIRM_CENTS="0",
            LOMO_DAILY_FREE_CENTS="0",
            LOMO_MEMORY_URL=f"http://127.0.0.1:{memory_port}",
        )
        try:
            await _roll_out(st, temporal_client, deployment, Workers(env, tmp_path))
        finally:
            memory.kill()
            memory.wait(timeout=10)


async def _roll_out(st: Stack, client: Client, deployment: str, pool: Workers) -> None:
    """Tasks parked on build a, build b made current, then every card answered."""
    with pool as workers:
        workers.spawn("build-a", LOMO_WORKER_BUILD_ID="a")
        await set_current(client, deployment, "a", wait_seconds=90)
        parked = [
            await _parked_on_price_card(st, "Generate an image of a red fox"),
            await _parked_on_price_card(st, "Generate an image of a blue whale"),
        ]
        workers.spawn("build-b", CHANGED, LOMO_WORKER_BUILD_ID="b")
        await set_current(client, deployment, "b", wait_seconds=90)
        fresh = await _parked_on_price_card(st, "Generate an image of a green frog")
        for _, card_id in [*parked, fresh]:
            r = await st.api.post(
                f"/v1/cards/{card_id}/actions", json={"action": "confirm"}, headers=st.auth
            )
            assert r.status_code == 200, r.text
        for tid, _ in [*parked, fresh]:
            handle = client.get_workflow_handle(f"task:{tid}")
            assert await handle.result() == "completed"
        assert [await _build_of(client, t) for t, _ in parked] == ["a", "a"]
        assert await _build_of(client, fresh[0]) == "b"
        for tid, _ in [*parked, fresh]:
            assert "EVENT_TYPE_WORKFLOW_TASK_FAILED" not in await _event_types(client, tid)
        # The changed build's first command is its timer; the pinned runs never set it.
        first_command = [(await _event_types(client, t))[4] for t, _ in [*parked, fresh]]
        assert first_command[-1] == "EVENT_TYPE_TIMER_STARTED"
        assert "EVENT_TYPE_TIMER_STARTED" not in first_command[:-1]
        states = {b.build_id: b.status for b in await builds(client, deployment)}
        assert states["b"] == "CURRENT" and states["a"] != "CURRENT"

"""Callback faults from the simulator: duplicates, out of order, lost. One job, one asset."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select
from temporalio.client import Client

from lomo.db.models import Event, GenerationOrder, ObjectVersion
from money.orders import apply_job_state
from tests.stack import Stack, running_stack
from tests.test_slice import run_cat_slice


async def _counts(st: Stack) -> dict[str, int]:
    async with st.db.session() as s:
        completed = await s.scalar(
            select(func.count()).select_from(Event).where(Event.type == "generation.completed")
        )
        return {
            "orders": int(await s.scalar(select(func.count()).select_from(GenerationOrder)) or 0),
            "versions": int(await s.scalar(select(func.count()).select_from(ObjectVersion)) or 0),
            "completed_events": int(completed or 0),
            "jobs": len((await st.sim.get("/jobs")).json()["jobs"]),
        }


@pytest.mark.parametrize(
    "faults",
    [{"duplicate_callbacks": 5}, {"out_of_order": True}, {"drop_callbacks": True}],
    ids=["duplicates_x5", "out_of_order", "dropped"],
)
async def test_callback_faults_change_nothing(
    faults: dict[str, object],
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        assert (await st.sim.post("/sim/faults", json=faults)).status_code == 200
        task = await run_cat_slice(st, "Generate an image of a red tabby cat")
        assert len(task["artifacts"]) == 1
        counts = await _counts(st)
        assert counts == {"orders": 1, "versions": 1, "completed_events": 1, "jobs": 1}
        async with st.db.session() as s:
            order = await s.scalar(select(GenerationOrder))
            assert order is not None and order.status == "succeeded" and order.progress == 1.0


def _order() -> GenerationOrder:
    return GenerationOrder(status="submitted", progress=0.0, last_seq=-1)


def test_job_state_machine_is_monotonic() -> None:
    o = _order()
    assert apply_job_state(o, "running", 0.5, 2, {})
    assert not apply_job_state(o, "running", 0.25, 1, {})  # older event
    assert o.progress == 0.5
    assert apply_job_state(o, "succeeded", 1.0, 4, {"result_url": "u"})
    assert not apply_job_state(o, "running", 0.75, 3, {})  # late progress after terminal
    assert not apply_job_state(o, "failed", 0.0, 9, {})  # terminal is final
    assert (o.status, o.result_url) == ("succeeded", "u")

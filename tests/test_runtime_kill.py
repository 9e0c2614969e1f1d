"""Crash recovery on real processes: a worker is SIGKILLed mid tool call, a second worker
takes over. The decision was persisted before the call, so the model is asked once; the
idempotent tool runs again under the same key and yields one result; a non-idempotent
tool in the same position yields `outcome_unknown`, which the model's next step sees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from temporalio.client import Client

from lomo.db.engine import Database
from lomo.db.models import ModelStep, ToolCall
from standin.server import create_standin_app
from tests.helpers import ThreadServer, eventually
from tests.runtime_support import (
    Workers,
    call_then_report,
    kill,
    last_tool_results,
    new_user,
    standin_worker_env,
    start_task,
)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("tool", "expect_status", "expect_executions", "marked"),
    # An idempotent call is not marked `started` (it runs again anyway).
    [("probe_idempotent", "done", 2, "planned"), ("probe_once", "outcome_unknown", 1, "started")],
)
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # one backend: slow
async def test_worker_killed_mid_call(
    tmp_path: Path,
    db: Database,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    tool: str,
    expect_status: str,
    expect_executions: int,
    marked: str,
) -> None:
    responder = call_then_report(
        tool, {"hold_s": 60, "label": "poster"}, "toolu_probe_1", "Result seen: "
    )
    with ThreadServer(create_standin_app(responder)) as model_server:
        env = standin_worker_env(
            tmp_path, db_url, temporal_server, task_queue, model_server.url, LOMO_TEST_TOOLS="1"
        )
        with Workers(env, tmp_path) as workers:
            first = workers.spawn("worker1")
            user = await new_user(db)
            task_id, handle = await start_task(
                # 5 s: a loaded CI machine must not miss a heartbeat of the live first worker
                temporal_client,
                db,
                task_queue,
                user,
                "make a poster",
                heartbeat_timeout_seconds=5,
            )
            probes = tmp_path / "probes"
            await eventually(lambda: _started(probes, tool), within=60)
            # The decision is in the DB and the call journaled (marked if it must be).
            async with db.session() as s:
                steps = list(await s.scalars(select(ModelStep).where(ModelStep.task_id == task_id)))
                call = await s.get(ToolCall, f"{task_id}:1:1:0")
            assert len(steps) == 1 and call is not None and call.status == marked
            kill(first)
            workers.spawn("worker2")
            assert await handle.result() == "completed"
    async with db.session() as s:
        call = await s.get(ToolCall, f"{task_id}:1:1:0")
        steps = list(await s.scalars(select(ModelStep).where(ModelStep.task_id == task_id)))
    assert call is not None and call.status == expect_status
    # Memory extraction goes through the same model endpoint; only task steps count here.
    steps_asked = [r for r in responder.requests if r.purpose == "task_step"]
    first_step = [r for r in steps_asked if not last_tool_results(r)]
    assert len(first_step) == 1, "the model was asked twice for the same step"
    executions = [
        json.loads(line) for line in (probes / "executions.jsonl").read_text().splitlines()
    ]
    assert [e["call_id"] for e in executions] == [f"{task_id}:1:1:0"] * expect_executions
    results = list(probes.glob("result-*.json"))
    assert len(results) == (1 if expect_status == "done" else 0)
    # The model's next step saw the outcome (one result, or outcome_unknown).
    seen = last_tool_results(steps_asked[-1])
    assert len(seen) == 1
    if expect_status == "done":
        assert '"label": "poster"' in seen[0]
    else:
        assert '"status": "outcome_unknown"' in seen[0]
    assert len(steps) == 2


async def _started(probes: Path, tool: str) -> bool:
    return _has_marker(probes, tool)


def _has_marker(probes: Path, tool: str) -> bool:
    return any(probes.glob(f"started-{tool}-*")) if probes.exists() else False

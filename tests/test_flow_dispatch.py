"""The next attempt of a flow run while the previous execution is still finishing: the run's
last activity marks it ended in the DB before the execution itself ends, so a quick resume
meets a running workflow id (CI saw a 500 there). It waits for that execution, then starts."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from api.dispatch import flows as flow_dispatch
from api.dispatch.flows import flow_workflow_id, start_flow_run
from lomo.errors import Conflict
from lomo.settings import Settings


@workflow.defn(name="LingeringAttempt")
class LingeringAttempt:
    """Stands for an attempt in its last steps: it ends after a short timer."""

    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.sleep(timedelta(seconds=seconds))
        return "failed"


async def _linger(client: Client, task_queue: str, run_id: str, seconds: float) -> None:
    await client.start_workflow(
        LingeringAttempt.run, seconds, id=flow_workflow_id(run_id), task_queue=task_queue
    )


async def test_a_resume_waits_for_the_previous_attempt_to_end(
    temporal_client: Client, task_queue: str
) -> None:
    run_id = f"frn_{uuid.uuid4().hex[:12]}"
    # The next attempt goes to a queue nobody polls: only its start is under test.
    settings = Settings(task_queue=f"{task_queue}-idle")
    async with Worker(temporal_client, task_queue=task_queue, workflows=[LingeringAttempt]):
        await _linger(temporal_client, task_queue, run_id, 1.5)
        await start_flow_run(temporal_client, settings, run_id, 2)
        desc = await temporal_client.get_workflow_handle(flow_workflow_id(run_id)).describe()
        assert desc.workflow_type == "FlowRunWorkflow"
        assert desc.status == WorkflowExecutionStatus.RUNNING
        await temporal_client.get_workflow_handle(flow_workflow_id(run_id)).terminate()


async def test_a_previous_attempt_that_does_not_end_is_a_conflict(
    temporal_client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = f"frn_{uuid.uuid4().hex[:12]}"
    monkeypatch.setattr(flow_dispatch, "PREVIOUS_ATTEMPT_WAIT_SECONDS", 0.5)
    settings = Settings(task_queue=f"{task_queue}-idle")
    async with Worker(temporal_client, task_queue=task_queue, workflows=[LingeringAttempt]):
        await _linger(temporal_client, task_queue, run_id, 60)
        with pytest.raises(Conflict):
            await start_flow_run(temporal_client, settings, run_id, 2)
        handle = temporal_client.get_workflow_handle(flow_workflow_id(run_id))
        assert (await handle.describe()).workflow_type == "LingeringAttempt"
        await handle.terminate()

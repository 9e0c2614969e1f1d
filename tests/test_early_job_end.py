"""A job that ends before the call that placed it has returned (a fast upstream on a
loaded worker): its terminal signal reaches the task while `run_tool` still runs. The task
keeps that end for the call and presents the picture at once, instead of waiting for its
compensating poll after `generation_wait_seconds`.

The race is made certain, not left to timing: the generation tool returns only after the
task's history holds the job's `generation_event` signal. The poll wait is set far beyond
the test's patience, so a task that dropped the early signal fails the test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from lomo.contracts import task as task_contract
from tests.helpers import eventually
from tests.stack import running_stack
from tests.test_slice import run_cat_slice
from tools.base import ToolCallContext, ToolResult
from tools.generation import GenerateTool

POLL_WAIT = 600.0  # far beyond run_cat_slice's 60 s: only the early signal can finish it


async def _signalled(client: Client, task_id: str) -> bool:
    handle = client.get_workflow_handle(task_contract.workflow_id(task_id))
    async for ev in handle.fetch_history_events():
        if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            if ev.workflow_execution_signaled_event_attributes.signal_name == (
                task_contract.GENERATION_EVENT
            ):
                return True
    return False


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_job_ending_before_its_call_returns_is_presented_at_once(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    placed = GenerateTool.run

    async def run_until_signalled(
        self: GenerateTool, ctx: ToolCallContext, args: dict[str, Any]
    ) -> ToolResult:
        res = await placed(self, ctx, args)
        if res.order_id:
            await eventually(lambda: _signalled(temporal_client, ctx.task_id), within=30)
        return res

    monkeypatch.setattr(GenerateTool, "run", run_until_signalled)
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        generation_wait_seconds=POLL_WAIT,
    ) as st:
        task = await run_cat_slice(st, "Generate an image of a red tabby cat")
        handle = temporal_client.get_workflow_handle(task_contract.workflow_id(task["task_id"]))
        polls = [
            ev
            async for ev in handle.fetch_history_events()
            if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and ev.activity_task_scheduled_event_attributes.activity_type.name == "poll_generation"
        ]
    assert task["status"] == "completed" and len(task["artifacts"]) == 1
    assert polls == []  # woken by the signal it kept, not by a poll

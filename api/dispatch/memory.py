"""Hand work to the person's MemoryWorkflow (signal-with-start; no HTTP here)."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from lomo.contracts import memory as contract
from lomo.settings import Settings
from memory.types import CorrectOutput, MemoryInput


def workflow_id(user_id: str) -> str:
    return contract.workflow_id(user_id)


async def _signal(client: Client, settings: Settings, user_id: str, signal: str, arg: str) -> None:
    await client.start_workflow(
        contract.WORKFLOW,
        MemoryInput(user_id, settings.memory_retry_seconds),
        id=workflow_id(user_id),
        task_queue=settings.task_queue,
        start_signal=signal,
        start_signal_args=[arg],
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )


def _with_start(settings: Settings, user_id: str) -> WithStartWorkflowOperation[Any, Any]:
    """Update-with-start: the person's memory workflow, started if it is not running."""
    return WithStartWorkflowOperation(
        contract.WORKFLOW,
        MemoryInput(user_id, settings.memory_retry_seconds),
        id=workflow_id(user_id),
        task_queue=settings.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


async def request_extraction(
    client: Client, settings: Settings, user_id: str, message_id: str
) -> None:
    """Called by the api for every accepted message: extraction runs in the background."""
    await _signal(client, settings, user_id, contract.EXTRACT, message_id)


async def request_forget(client: Client, settings: Settings, user_id: str, card_id: str) -> None:
    await _signal(client, settings, user_id, contract.FORGET, card_id)


async def request_correction(
    client: Client, settings: Settings, user_id: str, evidence_id: str
) -> CorrectOutput:
    start = _with_start(settings, user_id)
    result: CorrectOutput = await client.execute_update_with_start_workflow(
        contract.CORRECT,
        evidence_id,
        start_workflow_operation=start,
        result_type=CorrectOutput,
    )
    return result


async def forget_and_wait(client: Client, settings: Settings, user_id: str, card_id: str) -> str:
    """Run the confirmed forget now and return once it ran (or why it will run later)."""
    start = _with_start(settings, user_id)
    result: str = await client.execute_update_with_start_workflow(
        contract.FORGET_AND_WAIT,
        card_id,
        start_workflow_operation=start,
        result_type=str,
    )
    return result

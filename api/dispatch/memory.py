"""Hand work to the person's MemoryWorkflow (signal-with-start; no HTTP here)."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from lomo.settings import Settings
from memory.types import CorrectOutput, MemoryInput
from workflows.memory import MemoryWorkflow


def workflow_id(user_id: str) -> str:
    return f"memory:{user_id}"


async def _signal(client: Client, settings: Settings, user_id: str, signal: str, arg: str) -> None:
    await client.start_workflow(
        MemoryWorkflow.run,
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
        MemoryWorkflow.run,
        MemoryInput(user_id, settings.memory_retry_seconds),
        id=workflow_id(user_id),
        task_queue=settings.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


async def request_extraction(
    client: Client, settings: Settings, user_id: str, message_id: str
) -> None:
    """Called by the api for every accepted message: extraction runs in the background."""
    await _signal(client, settings, user_id, MemoryWorkflow.extract.__name__, message_id)


async def request_forget(client: Client, settings: Settings, user_id: str, card_id: str) -> None:
    await _signal(client, settings, user_id, MemoryWorkflow.forget.__name__, card_id)


async def request_correction(
    client: Client, settings: Settings, user_id: str, evidence_id: str
) -> CorrectOutput:
    start = _with_start(settings, user_id)
    # The SDK's overloads for update-with-start do not accept an async handler's method
    # (they expect its result type, not a coroutine); the call is right at run time.
    result: CorrectOutput = await client.execute_update_with_start_workflow(
        MemoryWorkflow.correct,  # type: ignore[arg-type]
        evidence_id,
        start_workflow_operation=start,
    )
    return result


async def forget_and_wait(client: Client, settings: Settings, user_id: str, card_id: str) -> str:
    """Run the confirmed forget now and return once it ran (or why it will run later)."""
    start = _with_start(settings, user_id)
    result: str = await client.execute_update_with_start_workflow(
        MemoryWorkflow.forget_and_wait,  # type: ignore[arg-type]
        card_id,
        start_workflow_operation=start,
    )
    return result

"""Hand messages and events to workflows (no HTTP here; routes call these)."""

from __future__ import annotations

from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from lomo.errors import Conflict, NotFound
from lomo.settings import Settings
from workflows.main_thread import MainThreadWorkflow
from workflows.types import GenerationEvent, MainThreadInput


async def route_via_main(client: Client, settings: Settings, user_id: str, message_id: str) -> None:
    """Signal-with-start: the user's main thread exists after the first message, forever."""
    await client.start_workflow(
        MainThreadWorkflow.run,
        MainThreadInput(user_id),
        id=f"main:{user_id}",
        task_queue=settings.task_queue,
        start_signal="route",
        start_signal_args=[message_id],
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )


async def deliver_to_task(client: Client, task_id: str, message_id: str) -> str:
    handle = client.get_workflow_handle(f"task:{task_id}")
    try:
        return str(await handle.execute_update("message", message_id))
    except WorkflowUpdateFailedError as e:
        cause = e.cause
        detail = cause.message if isinstance(cause, ApplicationError) else str(cause)
        raise Conflict(detail) from e
    except RPCError as e:
        raise NotFound(f"task {task_id} is not running: {e.message}") from e


async def signal_generation(client: Client, task_id: str, order_id: str, status: str) -> None:
    try:
        await client.get_workflow_handle(f"task:{task_id}").signal(
            "generation_event", GenerationEvent(order_id, status)
        )
    except RPCError:
        pass  # the task ended (stopped/completed): the order is recorded, nothing to wake


async def stop_task(client: Client, task_id: str) -> None:
    try:
        await client.get_workflow_handle(f"task:{task_id}").execute_update("stop")
    except RPCError as e:
        raise Conflict(f"task {task_id} is not running") from e


async def card_answered(client: Client, task_id: str, card_id: str) -> None:
    """Wake the card's task. The answer is already durable in the DB, so a task that has
    ended meanwhile simply does not hear it."""
    try:
        await client.get_workflow_handle(f"task:{task_id}").signal("card_answered", card_id)
    except RPCError:
        pass

"""The person's main thread and tasks: messages, generation events and task controls (pause,
resume, stop, archive, promote) sent to their workflows."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from lomo.contracts import main_thread as main_contract
from lomo.contracts import task as contract
from lomo.contracts.main_thread import MainThreadInput
from lomo.contracts.task import GenerationEvent, ResumeInput
from lomo.errors import Conflict
from lomo.settings import Settings


async def route_via_main(client: Client, settings: Settings, user_id: str, message_id: str) -> None:
    """Signal-with-start: the user's main thread exists after the first message, forever."""
    await client.start_workflow(
        main_contract.WORKFLOW,
        MainThreadInput(user_id, heartbeat_timeout_seconds=settings.heartbeat_timeout_seconds),
        id=main_contract.workflow_id(user_id),
        task_queue=settings.task_queue,
        start_signal=main_contract.ROUTE,
        start_signal_args=[message_id],
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )


async def _update(client: Client, task_id: str, update: str, *args: object) -> str:
    """Send an update (its name in the task's contract) to a task; its validator's
    refusal becomes a 409 with the reason."""
    try:
        return await _task(client, task_id).execute_update(update, args=list(args), result_type=str)
    except WorkflowUpdateFailedError as e:
        raise _refusal(e) from e
    except RPCError as e:
        raise Conflict(f"task {task_id} is not running ({e.message})") from e


def _refusal(e: WorkflowUpdateFailedError) -> Conflict:
    cause = e.cause
    return Conflict(cause.message if isinstance(cause, ApplicationError) else str(cause))


async def deliver_to_task(client: Client, task_id: str, message_id: str) -> str:
    """A message to its task: the task's refusal, or its workflow having ended, is a 409.
    Temporal being unreachable is raised as it is: the message is stored and owed (the
    relay hands it over), and "the task is not running" would be untrue."""
    try:
        return await _task(client, task_id).execute_update(
            contract.MESSAGE, message_id, result_type=str
        )
    except WorkflowUpdateFailedError as e:
        raise _refusal(e) from e
    except RPCError as e:
        if not workflow_gone(e):
            raise
        raise Conflict(f"task {task_id} is not running ({e.message})") from e


async def take_back(client: Client, task_id: str, message_id: str) -> None:
    """Tell a task a message it has not read was withdrawn or moved away. Only spares it
    a turn: a step that took the message id anyway finds it withdrawn in the database."""
    try:
        await _task(client, task_id).signal(contract.TAKEN_BACK, message_id)
    except RPCError as e:
        if not workflow_gone(e):
            raise


async def signal_generation(client: Client, task_id: str, order_id: str, status: str) -> None:
    try:
        await _task(client, task_id).signal(
            contract.GENERATION_EVENT, GenerationEvent(order_id, status)
        )
    except RPCError:
        pass  # the task ended (stopped/completed): the order is recorded, nothing to wake


async def stop_task(client: Client, task_id: str) -> None:
    await _update(client, task_id, contract.STOP)


async def pause_task(client: Client, task_id: str) -> None:
    await _update(client, task_id, contract.PAUSE)


async def resume_task(client: Client, task_id: str, inp: ResumeInput) -> None:
    await _update(client, task_id, contract.RESUME, inp)


async def archive_task(client: Client, task_id: str) -> bool:
    """True if a running workflow took the archive; False if the workflow had ended."""
    try:
        await _update(client, task_id, contract.ARCHIVE)
    except Conflict:
        return False
    return True


async def promote_task(client: Client, task_id: str) -> None:
    try:
        await _task(client, task_id).signal(contract.PROMOTE)
    except RPCError as e:
        raise Conflict(f"task {task_id} is not running ({e.message})") from e


async def card_answered(client: Client, task_id: str, card_id: str) -> None:
    """Wake the card's task. The answer is already durable in the DB: a task that ended or
    does not know the card yet finds it there (its card wait re-reads open cards). Temporal
    being unreachable is raised, not swallowed: the wake-up is then still owed (the card's
    hand-off is not recorded, and the relay sends it again)."""
    try:
        await _task(client, task_id).execute_update(contract.CARD_ANSWERED, card_id)
    except WorkflowUpdateFailedError:
        pass  # refused: the task closed, or already took the card (a repeat)
    except RPCError as e:
        if not workflow_gone(e):
            raise


def _task(client: Client, task_id: str) -> WorkflowHandle[Any, str]:
    return client.get_workflow_handle(contract.workflow_id(task_id), result_type=str)


def workflow_gone(e: RPCError) -> bool:
    """The workflow ended or never existed (Temporal answered), as against Temporal being
    unreachable or overloaded (worth another try)."""
    return e.status == RPCStatusCode.NOT_FOUND

"""Hand flow runs and their events to FlowRunWorkflow (`flowrun:{run_id}`); no HTTP here."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from api.dispatch.tasks import workflow_gone
from flows.graph import run_of_call
from lomo.contracts import flow_run as contract
from lomo.contracts.flow_run import FlowRunInput
from lomo.contracts.task import GenerationEvent
from lomo.db.models import Card
from lomo.errors import Conflict
from lomo.settings import Settings

# How long a resume waits for the previous attempt's execution to finish its last steps.
PREVIOUS_ATTEMPT_WAIT_SECONDS = 30


def flow_workflow_id(run_id: str) -> str:
    return contract.workflow_id(run_id)


async def start_flow_run(client: Client, settings: Settings, run_id: str, attempt: int) -> None:
    """A run, or the next attempt of an ended run (same workflow id, a new execution)."""

    async def start() -> None:
        await client.start_workflow(
            contract.WORKFLOW,
            FlowRunInput(run_id, attempt),
            id=flow_workflow_id(run_id),
            task_queue=settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )

    try:
        await start()
    except WorkflowAlreadyStartedError:
        # The run's last activity marks it ended in the DB; the execution may still be
        # finishing (waking its task). Let it end, then start the next attempt.
        previous = client.get_workflow_handle(flow_workflow_id(run_id))
        try:
            await asyncio.wait_for(previous.result(), timeout=PREVIOUS_ATTEMPT_WAIT_SECONDS)
        except WorkflowFailureError:
            pass  # it ended, which is all that matters here
        except TimeoutError as e:
            raise Conflict(f"flow run {run_id} is still finishing; try again shortly") from e
        await start()


async def signal_flow_node(client: Client, call_id: str, order_id: str, status: str) -> bool:
    """A flow node's order reached a terminal state: wake its run. False if the order is
    not a flow node's (then it is a task's own call)."""
    run_id = run_of_call(call_id)
    if run_id is None:
        return False
    try:
        await _run(client, run_id).signal(contract.NODE_EVENT, GenerationEvent(order_id, status))
    except RPCError:
        pass  # the run ended; its next attempt reads the order from the DB
    return True


async def flow_card_answered(client: Client, card: Card) -> None:
    """A run's price card (the total, or one node's) was answered: wake the run."""
    payload = card.payload or {}
    run_id = payload.get("flow_run") or run_of_call(str(payload.get("call_id") or ""))
    if not run_id:
        return
    try:
        await _run(client, str(run_id)).signal(contract.CARD_ANSWERED, card.id)
    except RPCError as e:
        # The run ended: the answer is durable, its next attempt reads it. Temporal down is
        # raised, so the card's hand-off stays owed and the relay sends it again.
        if not workflow_gone(e):
            raise


def _run(client: Client, run_id: str) -> WorkflowHandle[Any, str]:
    return client.get_workflow_handle(flow_workflow_id(run_id), result_type=str)

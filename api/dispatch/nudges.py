"""Wake the person's NudgeWorkflow (signal-with-start; no HTTP here)."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy

from lomo.contracts import nudge as contract
from lomo.contracts.nudge import NudgeInput
from lomo.settings import Settings


async def touch_nudges(client: Client, settings: Settings, user_id: str) -> None:
    """The person did something: their nudge workflow (started now if it is not running)
    looks again at once, so an answer resets the back-off before the next reminder."""
    await client.start_workflow(
        contract.WORKFLOW,
        NudgeInput(user_id, settings.nudge_check_seconds, settings.nudge_rounds),
        id=contract.workflow_id(user_id),
        task_queue=settings.task_queue,
        start_signal=contract.TOUCH,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )

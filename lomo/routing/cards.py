"""The `clarify` card: the router could not tell which task a message meant, so it asked.

The card has no task; its answer goes back to the person's main thread, which routes the
original message to the chosen task (or starts something new) without another model call.
"""

from __future__ import annotations

from typing import Any

from temporalio.common import WorkflowIDReusePolicy

from lomo.cards import CardEffect
from lomo.db.models import Card

NEW_OPTION = "new"  # the option id for "none of these: start something new"


async def _hand_to_main_thread(state: Any, card: Card) -> None:
    from workflows.main_thread import MainThreadWorkflow
    from workflows.types import MainThreadInput

    client = await state.temporal()
    # Signal-with-start: the same door every unrouted message uses, so the answer is
    # serialized with the person's other messages.
    await client.start_workflow(
        MainThreadWorkflow.run,
        MainThreadInput(card.user_id),
        id=f"main:{card.user_id}",
        task_queue=state.settings.task_queue,
        start_signal="route",
        start_signal_args=[card.id],
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )


CLARIFY_EFFECT = CardEffect(after_commit=_hand_to_main_thread)

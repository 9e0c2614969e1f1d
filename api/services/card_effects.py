"""Which area acts on which card kind (each area owns its effect; see cards/effects.py).

Effects that only touch the DB live with their area; the two that hand work to a workflow
(clarify → the main thread, forget → the memory workflow) are composed here, since only
the api layer may start workflows.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError

from api.dispatch import TemporalGetter
from api.dispatch.memory import forget_and_wait, request_forget
from api.dispatch.tasks import route_via_main
from cards.effects import CardEffect
from cards.store import confirmed
from checklist.decisions import DECISION_EFFECT
from lomo.db.engine import Database
from lomo.db.models import Card
from lomo.settings import Settings
from memory.models import ForgetRecord
from money.cards import PRICE_EFFECT
from workspace.cards import DELETE_EFFECT
from workspace.store import BlobStore


@dataclass
class HandoffState:
    """What an answer's hand-offs read: the api's (`api/deps.py`) or the relay's."""

    db: Database
    settings: Settings
    assets: BlobStore
    temporal: TemporalGetter


async def _hand_to_main_thread(state: HandoffState, card: Card) -> None:
    # The same door every unrouted message uses, so the answer is serialized with the
    # person's other messages; the main thread routes it without a model call.
    await route_via_main(await state.temporal(), state.settings, card.user_id, card.id)


async def _start_cascade(state: HandoffState, card: Card) -> None:
    """Forget before anything else hears of the answer (the card's task wakes after this),
    bounded: if the worker is slow the cascade still runs, just after the wake-up."""
    if not confirmed(card) or await _forgotten(state, card):
        return
    client = await state.temporal()
    try:
        await asyncio.wait_for(
            forget_and_wait(client, state.settings, card.user_id, card.id),
            state.settings.memory_forget_wait_seconds,
        )
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
        # The Temporal client turns the cancelled wait into its own error, not TimeoutError;
        # when it is the caller's own bound that ran out, this gives up too.
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        await request_forget(client, state.settings, card.user_id, card.id)


async def _forgotten(state: HandoffState, card: Card) -> bool:
    """The cascade already ran (a repeated hand-off, e.g. the relay after a lost mark):
    signalling again would only run the memory activity once more to find its record."""
    async with state.db.session() as s:
        return await s.get(ForgetRecord, card.id) is not None


EFFECTS: dict[str, CardEffect] = {
    "confirm": DECISION_EFFECT,
    "select": DECISION_EFFECT,
    "price": PRICE_EFFECT,
    "clarify": CardEffect(after_commit=_hand_to_main_thread),
    "forget": CardEffect(after_commit=_start_cascade),
    "delete": DELETE_EFFECT,
}

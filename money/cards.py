"""What answering a `price` card does: the only place (besides the budget API) where an
approval is born. It runs inside the transaction that records the person's authenticated
answer, so the answer and the approval commit together or not at all."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from cards.effects import CardEffect
from cards.store import confirmed
from lomo.db.models import Card
from money.policy import approve_call, approve_plan


async def _on_price_answer(s: AsyncSession, card: Card) -> None:
    if not confirmed(card) or card.price_cents is None:
        return  # a rejection creates nothing; the waiting tool call reads the card's answer
    payload = card.payload or {}
    if payload.get("plan"):
        if card.task_id is None:
            return
        await approve_plan(
            s, card.user_id, card.task_id, card.price_cents, f"card:{card.id}", "card", card.id
        )
        return
    calls = payload.get("calls")
    if isinstance(calls, dict):  # a flow run's one card for the total: each node it priced
        for call_id, amount in calls.items():
            await approve_call(s, card.user_id, card.task_id, str(call_id), int(amount), card.id)
        return
    # A call's price card is keyed by its call_id (create_card(..., key=call_id)).
    if card.key and payload.get("call_id") == card.key:
        await approve_call(s, card.user_id, card.task_id, card.key, card.price_cents, card.id)


PRICE_EFFECT = CardEffect(in_transaction=_on_price_answer)

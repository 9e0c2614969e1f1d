"""Cards: listing them, and the person's answer. An answer is routed by card id with no
model call: it is recorded with its kind's in-transaction effect, then handed on to
Temporal within a bound (`api/services/card_handoff.py`)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.schemas.cards import CardActionIn, CardList, CardView
from api.services.card_effects import EFFECTS, HandoffState
from api.services.card_handoff import hand_on_bounded
from lomo.cards import answer_card, card_view, get_card
from lomo.db.models import Card
from lomo.errors import Conflict, Forbidden


async def list_cards(
    s: AsyncSession, user_id: str, status: str | None, task_id: str | None
) -> CardList:
    q = select(Card).where(Card.user_id == user_id).order_by(Card.created_at)
    if status:
        q = q.where(Card.status == status)
    if task_id:
        q = q.where(Card.task_id == task_id)
    return CardList.model_validate({"cards": [card_view(c) for c in await s.scalars(q)]})


async def read_card(s: AsyncSession, user_id: str, card_id: str) -> CardView:
    return CardView.model_validate(card_view(await get_card(s, user_id, card_id)))


# Cards whose confirmation spends money or destroys something: only the person's app
# session may give anything but a refusal.
APP_ONLY_KINDS = frozenset({"price", "delete", "forget"})


def check_channel(card: Card, action: str, channel: str) -> None:
    if channel != "app" and card.kind in APP_ONLY_KINDS and action != "reject":
        raise Forbidden(
            f"a {card.kind} card is confirmed in the person's app; an API token can only reject it"
        )


async def answer(
    state: HandoffState, user_id: str, card_id: str, body: CardActionIn, channel: str
) -> CardView:
    """The answer is stored before Temporal is asked anything, and the hand-offs after it
    are bounded: a Temporal that is down or slow delays them (the relay finishes them),
    never the answer."""
    try:
        async with state.db.session() as s:
            card = await answer_card(s, user_id, card_id, body.action, body.option_id, body.text)
            check_channel(card, body.action, channel)  # raising rolls the answer back
            effect = EFFECTS.get(card.kind)
            if effect and effect.in_transaction:
                await effect.in_transaction(s, card)
            view = CardView.model_validate(card_view(card))
    except Conflict:
        # The same answer again is the client's retry: the first attempt may have stored it
        # and then not handed it on (the api died, or the client gave up waiting). Unless
        # the hand-offs are recorded as done they are repeated now (each is idempotent),
        # and the client still hears that the card is answered.
        async with state.db.session() as s:
            card = await get_card(s, user_id, card_id)
        same = {"action": body.action, "option_id": body.option_id, "text": body.text}
        if card.answer == same and card.handed_at is None:
            await hand_on_bounded(state, card)
        raise
    await hand_on_bounded(state, card)
    return view

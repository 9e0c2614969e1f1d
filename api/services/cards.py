"""Cards: listing them, and the person's answer. An answer is routed by card id with no
model call: it is recorded with its kind's in-transaction effect (the cards room), then
handed on to Temporal within a bound (`api/services/card_handoff.py`)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.schemas.cards import CardActionIn, CardList, CardView
from api.services.card_effects import EFFECTS, HandoffState
from api.services.card_handoff import hand_on_bounded
from api.services.pages import finish
from cards.effects import record_answer
from cards.store import get_card
from cards.views import card_view
from lomo.db.models import Card
from lomo.db.pages import Page, by_creation
from lomo.errors import Conflict


async def list_cards(
    s: AsyncSession, user_id: str, status: str | None, task_id: str | None, page: Page
) -> CardList:
    """Oldest first."""
    q = select(Card).where(Card.user_id == user_id)
    if status:
        q = q.where(Card.status == status)
    if task_id:
        q = q.where(Card.task_id == task_id)
    q = await by_creation(
        s, q, Card.created_at, Card.id, page, descending=False, scope=[Card.user_id == user_id]
    )
    rows, after = finish(list(await s.scalars(q)), page, lambda c: c.id)
    return CardList.model_validate({"cards": [card_view(c) for c in rows], "next": after})


async def read_card(s: AsyncSession, user_id: str, card_id: str) -> CardView:
    return CardView.model_validate(card_view(await get_card(s, user_id, card_id)))


async def answer(
    state: HandoffState, user_id: str, card_id: str, body: CardActionIn, channel: str
) -> CardView:
    """The answer is stored before Temporal is asked anything, and the hand-offs after it
    are bounded: a Temporal that is down or slow delays them (the relay finishes them),
    never the answer."""
    try:
        async with state.db.session() as s:
            card = await record_answer(
                s, EFFECTS, user_id, card_id, channel, body.action, body.option_id, body.text
            )
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

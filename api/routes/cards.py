from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from sqlalchemy import select

from api.deps import DbDep, UserDep
from api.services.card_effects import EFFECTS
from api.services.card_handoff import hand_on_bounded
from lomo.cards import answer_card, card_view, get_card
from lomo.db.models import Card
from lomo.errors import Conflict

router = APIRouter(prefix="/v1/cards", tags=["cards"])


class CardActionIn(BaseModel):
    action: Literal["confirm", "reject", "select", "revise"]
    option_id: str | None = Field(default=None, max_length=80)
    text: str | None = Field(default=None, max_length=20_000)


@router.get("")
async def list_cards(
    user: UserDep, db: DbDep, status: str | None = None, task_id: str | None = None
) -> dict[str, Any]:
    async with db.session() as s:
        q = select(Card).where(Card.user_id == user.id).order_by(Card.created_at)
        if status:
            q = q.where(Card.status == status)
        if task_id:
            q = q.where(Card.task_id == task_id)
        return {"cards": [card_view(c) for c in await s.scalars(q)]}


@router.get("/{card_id}")
async def get_one(card_id: str, user: UserDep, db: DbDep) -> dict[str, Any]:
    async with db.session() as s:
        return card_view(await get_card(s, user.id, card_id))


@router.post("/{card_id}/actions")
async def act(
    card_id: str, body: CardActionIn, request: Request, user: UserDep, db: DbDep
) -> dict[str, Any]:
    """Routed by card id, no model call: the answer is recorded, its effect applied, and the
    card's task (if any) woken. The answer is stored before Temporal is asked anything (no
    Temporal dependency here), and the hand-offs after it are bounded: a Temporal that is
    down or slow delays them (the relay finishes them), never the answer."""
    try:
        async with db.session() as s:
            card = await answer_card(s, user.id, card_id, body.action, body.option_id, body.text)
            effect = EFFECTS.get(card.kind)
            if effect and effect.in_transaction:
                await effect.in_transaction(s, card)
            view = card_view(card)
    except Conflict:
        # The same answer again is the client's retry: the first attempt may have stored it
        # and then not handed it on (the api died, or the client gave up waiting). Unless
        # the hand-offs are recorded as done they are repeated now (each is idempotent),
        # and the client still hears that the card is answered.
        async with db.session() as s:
            card = await get_card(s, user.id, card_id)
        same = {"action": body.action, "option_id": body.option_id, "text": body.text}
        if card.answer == same and card.handed_at is None:
            await hand_on_bounded(request.app.state, card)
        raise
    await hand_on_bounded(request.app.state, card)
    return view

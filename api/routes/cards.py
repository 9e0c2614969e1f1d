from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from sqlalchemy import select

from api.card_effects import EFFECTS
from api.deps import DbDep, TemporalDep, UserDep
from api.dispatch import card_answered
from api.flow_dispatch import flow_card_answered
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
    card_id: str,
    body: CardActionIn,
    request: Request,
    user: UserDep,
    db: DbDep,
    temporal: TemporalDep,
) -> dict[str, Any]:
    """Routed by card id, no model call: the answer is recorded, its effect applied, and the
    card's task (if any) woken."""
    try:
        async with db.session() as s:
            card = await answer_card(s, user.id, card_id, body.action, body.option_id, body.text)
            effect = EFFECTS.get(card.kind)
            if effect and effect.in_transaction:
                await effect.in_transaction(s, card)
            view = card_view(card)
    except Conflict:
        # The same answer again is the client's retry: the first attempt may have stored it
        # and then failed before handing it on (a 500), e.g. a clarify answer the main
        # thread never heard of. The hand-offs are repeated (each is idempotent), and the
        # client still hears that the card is answered.
        async with db.session() as s:
            card = await get_card(s, user.id, card_id)
        if card.answer == {"action": body.action, "option_id": body.option_id, "text": body.text}:
            await _hand_on(request, temporal, card)
        raise
    await _hand_on(request, temporal, card)
    return view


async def _hand_on(request: Request, temporal: Any, card: Card) -> None:
    effect = EFFECTS.get(card.kind)
    if effect and effect.after_commit:
        await effect.after_commit(request.app.state, card)
    if card.task_id:
        await card_answered(temporal, card.task_id, card.id)
    await flow_card_answered(temporal, card)

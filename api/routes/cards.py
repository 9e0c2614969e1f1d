"""Cards: the questions put to the person, and their answers."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ChannelDep, CurrentUser, HandoffDep, SessionDep
from api.schemas.cards import CardActionIn, CardList, CardView
from api.services import cards

router = APIRouter(prefix="/v1/cards", tags=["cards"])


@router.get("", response_model_exclude_unset=True)
async def list_cards(
    user: CurrentUser, session: SessionDep, status: str | None = None, task_id: str | None = None
) -> CardList:
    return await cards.list_cards(session, user.id, status, task_id)


@router.get("/{card_id}", response_model_exclude_unset=True)
async def get_one(card_id: str, user: CurrentUser, session: SessionDep) -> CardView:
    return await cards.read_card(session, user.id, card_id)


@router.post("/{card_id}/actions", response_model_exclude_unset=True)
async def act(
    card_id: str, body: CardActionIn, user: CurrentUser, channel: ChannelDep, state: HandoffDep
) -> CardView:
    """Routed by card id, no model call: the answer is recorded, its effect applied, and the
    card's task (if any) woken. 409 for a second answer; 403 when an API token tries to
    confirm a price, delete or forget card (only the person's app confirms those)."""
    return await cards.answer(state, user.id, card_id, body, channel)

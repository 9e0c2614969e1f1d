"""Creating a card, reading it, and recording the person's answer once."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from cards.views import card_view
from lomo import clock
from lomo.db.models import Card
from lomo.errors import Conflict, InvalidInput, NotFound
from lomo.events import append_event
from lomo.ids import new_id
from lomo.states import CardAction, CardKind, CardStatus

CARD_KINDS = tuple(CardKind)
ACTIONS = tuple(CardAction)


async def create_card(
    s: AsyncSession,
    *,
    user_id: str,
    kind: str,
    title: str,
    options: list[dict[str, str]] | None = None,
    task_id: str | None = None,
    price_cents: int | None = None,
    payload: dict[str, Any] | None = None,
    key: str | None = None,
) -> Card:
    """Create (or, for the same `key`, return the existing) card and emit `card.created`."""
    if kind not in CARD_KINDS:
        raise InvalidInput(f"unknown card kind {kind!r}")
    if key is not None:
        old = await s.scalar(select(Card).where(Card.user_id == user_id, Card.key == key))
        if old is not None:
            return old
    card = Card(
        id=new_id("crd"),
        user_id=user_id,
        task_id=task_id,
        kind=kind,
        title=title,
        options=options or [],
        price_cents=price_cents,
        payload=payload or {},
        key=key,
    )
    s.add(card)
    await s.flush()
    await append_event(s, user_id, "card.created", card_view(card))
    return card


async def get_card(s: AsyncSession, user_id: str, card_id: str, lock: bool = False) -> Card:
    card = await s.get(Card, card_id, with_for_update=lock)
    if card is None or card.user_id != user_id:
        raise NotFound(f"no card {card_id}")
    return card


async def answer_card(
    s: AsyncSession,
    user_id: str,
    card_id: str,
    action: str,
    option_id: str | None = None,
    text: str | None = None,
) -> Card:
    """Record the person's answer once; a second answer is a conflict."""
    card = await get_card(s, user_id, card_id, lock=True)
    if card.status != CardStatus.OPEN:
        raise Conflict(f"card {card_id} is already {card.status}")
    if action not in ACTIONS:
        raise InvalidInput(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
    if action == CardAction.SELECT:
        ids = [o.get("id") for o in card.options]
        if option_id not in ids:
            raise InvalidInput(f"option_id must be one of {ids}")
    if action == CardAction.REVISE and not text:
        raise InvalidInput("revise needs a text")
    card.status = CardStatus.ANSWERED
    card.answer = {"action": action, "option_id": option_id, "text": text}
    card.answered_at = clock.now()
    await append_event(
        s, user_id, "card.answered", {"card_id": card.id, "task_id": card.task_id, **card.answer}
    )
    return card


def confirmed(card: Card) -> bool:
    return (
        card.status == CardStatus.ANSWERED
        and (card.answer or {}).get("action") == CardAction.CONFIRM
    )


def agreed(card: Card) -> bool:
    """The person said yes, or picked one of the options."""
    answer = card.answer or {}
    return confirmed(card) or (
        card.status == CardStatus.ANSWERED and answer.get("action") == CardAction.SELECT
    )

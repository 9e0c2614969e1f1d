"""What an answer sets off. Rooms attach effects to card kinds (`CardEffect`):
`in_transaction` runs inside the transaction that records the answer (e.g. creating an
approval: both commit or neither), `after_commit` runs once the answer is durable (e.g.
starting the forget cascade). A card that belongs to a task additionally wakes that task
(the api sends `card_answered`). The registry of effects by kind is composed where all of
them are known (the api), and handed to `record_answer`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from cards.store import answer_card
from lomo.db.models import Card
from lomo.errors import Forbidden
from lomo.states import CardAction, CardKind


@dataclass
class CardEffect:
    in_transaction: Callable[[AsyncSession, Card], Awaitable[None]] | None = None
    # Gets the api's app state (settings, db, temporal getter) and the answered card.
    after_commit: Callable[[Any, Card], Awaitable[None]] | None = None


# Cards whose confirmation spends money or destroys something: only the person's app
# session may give anything but a refusal.
APP_ONLY_KINDS = frozenset({CardKind.PRICE, CardKind.DELETE, CardKind.FORGET})


def check_channel(card: Card, action: str, channel: str) -> None:
    if channel != "app" and card.kind in APP_ONLY_KINDS and action != CardAction.REJECT:
        raise Forbidden(
            f"a {card.kind} card is confirmed in the person's app; an API token can only reject it"
        )


async def record_answer(
    s: AsyncSession,
    effects: Mapping[str, CardEffect],
    user_id: str,
    card_id: str,
    channel: str,
    action: str,
    option_id: str | None = None,
    text: str | None = None,
) -> Card:
    """The person's answer with its kind's in-transaction effect, in the caller's
    transaction; a refused channel raises before anything is kept."""
    card = await answer_card(s, user_id, card_id, action, option_id, text)
    check_channel(card, action, channel)  # raising rolls the answer back
    effect = effects.get(card.kind)
    if effect and effect.in_transaction:
        await effect.in_transaction(s, card)
    return card

"""Cards that decide a checklist step: asking the person, and the answer closing the step."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from cards.effects import CardEffect
from cards.store import agreed, create_card
from lomo import clock
from lomo.db.models import Card, ChecklistItem
from lomo.states import CardKind
from lomo.words import say

ASK_KINDS = (CardKind.CONFIRM, CardKind.SELECT, CardKind.CLARIFY)


class NoStep(LookupError):
    """The card was to decide a step the checklist does not have."""


async def ask(
    s: AsyncSession,
    *,
    user_id: str,
    task_id: str,
    kind: str,
    title: str,
    options: list[dict[str, str]],
    item_id: str | None,
    key: str,
) -> Card:
    """The card in front of the person, tied to the step it decides (`item_id`). A confirm
    card without options gets yes and no."""
    if item_id and (await s.get(ChecklistItem, item_id)) is None:
        raise NoStep(item_id)
    if kind == CardKind.CONFIRM and not options:
        options = [
            {"id": "confirm", "label": say("answer.yes")},
            {"id": "reject", "label": say("answer.no")},
        ]
    return await create_card(
        s,
        user_id=user_id,
        kind=kind,
        title=title[:500],
        options=options,
        task_id=task_id,
        payload={"item_id": item_id} if item_id else {},
        key=key,
    )


async def _close_decided_step(s: AsyncSession, card: Card) -> None:
    """The person's yes (or choice) on a card tied to a checklist step is that step's
    evidence: the step is done at once, by the person's authenticated action."""
    item_id = (card.payload or {}).get("item_id")
    if not item_id or not agreed(card):
        return
    item = await s.get(ChecklistItem, str(item_id), with_for_update=True)
    if item is None or item.task_id != card.task_id or item.status == "done":
        return
    item.status = "done"
    item.evidence = {"card_id": card.id, "option_id": (card.answer or {}).get("option_id")}
    item.confirmed_by_card = card.id
    item.updated_at = clock.now()


DECISION_EFFECT = CardEffect(in_transaction=_close_decided_step)

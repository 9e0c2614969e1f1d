"""Which area acts on which card kind (each area owns its effect; see lomo/cards.py)."""

from __future__ import annotations

from activities.checklist import DECISION_EFFECT
from lomo.cards import CardEffect
from lomo.money.cards import PRICE_EFFECT
from lomo.routing.cards import CLARIFY_EFFECT
from memory.cards import FORGET_EFFECT
from workspace.cards import DELETE_EFFECT

EFFECTS: dict[str, CardEffect] = {
    "confirm": DECISION_EFFECT,
    "select": DECISION_EFFECT,
    "price": PRICE_EFFECT,
    "clarify": CLARIFY_EFFECT,
    "forget": FORGET_EFFECT,
    "delete": DELETE_EFFECT,
}

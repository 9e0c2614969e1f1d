"""What answering a `price` card does (owned by the money issue; not built yet)."""

from __future__ import annotations

from lomo.cards import CardEffect

PRICE_EFFECT = CardEffect()

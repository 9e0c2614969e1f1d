"""What answering a `forget` card does (owned by the memory issue; not built yet)."""

from __future__ import annotations

from lomo.cards import CardEffect

FORGET_EFFECT = CardEffect()

"""What answering a `delete` card does (owned by the workspace issue; not built yet)."""

from __future__ import annotations

from lomo.cards import CardEffect

DELETE_EFFECT = CardEffect()

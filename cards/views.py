"""A card as the api and the event stream show it."""

from __future__ import annotations

from typing import Any

from lomo.db.models import Card


def card_view(c: Card) -> dict[str, Any]:
    out: dict[str, Any] = {
        "card_id": c.id,
        "task_id": c.task_id,
        "kind": c.kind,
        "status": c.status,
        "title": c.title,
        "options": c.options,
        "payload": c.payload,
        "created_at": c.created_at.isoformat(),
    }
    if c.price_cents is not None:
        out["price"] = {"amount_cents": c.price_cents, "currency": "EUR"}
    if c.answer is not None:
        out["answer"] = c.answer
    return out

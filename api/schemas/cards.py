"""Cards: questions to the person and their answers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from api.schemas.common import Price


class CardActionIn(BaseModel):
    action: Literal["confirm", "reject", "select", "revise"]
    option_id: str | None = Field(default=None, max_length=80)
    text: str | None = Field(default=None, max_length=20_000)


class CardView(BaseModel):
    card_id: str
    task_id: str | None
    kind: str = Field(description="confirm, select, clarify, price, forget or delete")
    status: str = Field(description="open, answered or expired")
    title: str
    options: list[Any]
    payload: dict[str, Any]
    created_at: str
    price: Price | None = Field(default=None, description="absent on a card without a price")
    answer: dict[str, Any] | None = Field(default=None, description="absent until answered")


class CardList(BaseModel):
    cards: list[CardView]
    next: str | None = Field(
        default=None, description="the cursor of the next page; null on the last page"
    )

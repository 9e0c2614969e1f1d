"""Small shapes several resources share."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

# Integers compared with or stored in INTEGER columns: larger ones are refused as bad
# input (422) instead of overflowing the database driver (a 500).
MAX_DB_INT = 2**31 - 1


class CardRef(BaseModel):
    """A request that waits for the person's confirmation: the card that asks."""

    card_id: str


class Price(BaseModel):
    amount_cents: int = Field(description="a flow run's: the quoted total of the nodes to run")
    currency: Literal["EUR"]

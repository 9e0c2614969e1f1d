"""A relay round stops at the first item only when Temporal is unreachable (every later
item would fail the same way); an item failing on its own is skipped for the round, so one
bad card or message cannot hold up all the others behind it, round after round."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

import api.services.relay as relay
from cards.store import answer_card, create_card
from lomo.db.engine import Database
from lomo.settings import Settings
from tests.runtime_support import new_user
from workspace.store import AssetStore


async def _two_answered_cards(db: Database) -> list[str]:
    user = await new_user(db)
    ids = []
    async with db.session() as s:
        for title in ("First?", "Second?"):
            card = await create_card(s, user_id=user, kind="confirm", title=title)
            ids.append(card.id)
    for card_id in ids:
        async with db.session() as s:
            await answer_card(s, user, card_id, "confirm")
    return ids


@pytest.mark.parametrize(
    ("failure", "handed"),
    [
        (ValueError("this card's effect is broken"), 1),  # its own: the next one goes on
        (RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b""), 0),  # all would fail
    ],
)
async def test_a_failing_card_does_not_hold_up_the_round(
    db: Database,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    failure: BaseException,
    handed: int,
) -> None:
    first, second = await _two_answered_cards(db)
    tried: list[str] = []

    async def hand_on(_state: Any, card: Any) -> None:
        tried.append(card.id)
        if card.id == first:
            raise failure

    monkeypatch.setattr(relay, "hand_on", hand_on)
    settings = Settings(data_dir=tmp_path, handoff_relay_seconds=0)
    assets = AssetStore(tmp_path / "assets")
    assert await relay.relay_once(db, object(), settings, assets) == handed
    assert tried == ([first, second] if handed else [first])

"""A stored message whose hand-off failed reaches its task even when no client resends it.

`tests/test_accept_handoff.py` covers the client that sends the same message again. Here
the client took the 202 of a message whose hand-off failed (or the api died between commit
and hand-off): only the api's relay (`api/services/relay.py`) can finish the hand-off. Each test
fails the hand-off once at exactly that point and never resends; without the relay the
message stays stored and unrouted for good.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from temporalio.client import Client

from api.services.relay import relay_once
from lomo.db.models import MessageRow
from tests.handoff_support import fail_hand_off, get_message, persistent_task
from tests.helpers import eventually
from tests.stack import Stack, running_stack

CAT = "Generate an image of a red tabby cat"
RELAY_S = 1.0


async def _post_once(stack: Stack, path: str, body: dict[str, Any]) -> None:
    """One attempt, answered 202: the message is stored, its hand-off owed."""
    r = await stack.api.post(path, json=body, headers=stack.auth)
    assert r.status_code == 202, r.text


async def _stored(stack: Stack, text: str) -> MessageRow:
    async with stack.db.session() as s:
        row = await s.scalar(select(MessageRow).where(MessageRow.text == text))
    assert row is not None, "the message was not stored"
    return row


async def test_the_relay_routes_a_message_whose_hand_off_failed_and_was_never_resent(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        handoff_relay_seconds=RELAY_S,
    ) as stack:
        failed = fail_hand_off(monkeypatch, "route_via_main", 1)
        await _post_once(stack, "/v1/messages", {"text": CAT})
        assert failed
        row = await _stored(stack, CAT)
        assert row.handed_at is None and row.routing_status == "pending"

        async def routed() -> Any:
            m = await get_message(stack, row.id)
            return m if m["routing"].get("task_id") else None

        m = await eventually(routed, within=60)
        assert m["routing"]["decision"] == "lightweight"
        assert (await _stored(stack, CAT)).handed_at is not None


async def test_the_relay_delivers_a_direct_message_whose_delivery_failed(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        handoff_relay_seconds=RELAY_S,
    ) as stack:
        task_id = await persistent_task(stack)
        failed = fail_hand_off(monkeypatch, "deliver_to_task", 1)
        later = "Make it a bit darker"
        await _post_once(stack, f"/v1/tasks/{task_id}/messages", {"text": later})
        assert failed
        row = await _stored(stack, later)
        assert row.handed_at is None

        async def read_by_task() -> Any:
            return (await get_message(stack, row.id)).get("processed")

        seen = await eventually(read_by_task, within=90)
        assert seen["task_id"] == task_id


async def test_a_relay_round_while_temporal_is_down_leaves_the_message_for_the_next(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rounds are driven by hand here (the loop is off): a round that cannot reach
    Temporal hands nothing over and marks nothing; the next one does."""
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        handoff_relay_seconds=0,
    ) as stack:
        failed = fail_hand_off(monkeypatch, "route_via_main", 2)  # the request's, then a round's
        await _post_once(stack, "/v1/messages", {"text": CAT})
        row = await _stored(stack, CAT)
        settings = stack.settings.model_copy(update={"handoff_relay_seconds": 0.0})
        assert await relay_once(stack.db, temporal_client, settings) == 0
        assert len(failed) == 2 and (await _stored(stack, CAT)).handed_at is None
        assert await relay_once(stack.db, temporal_client, settings) == 1
        assert (await _stored(stack, CAT)).handed_at is not None
        assert await relay_once(stack.db, temporal_client, settings) == 0  # nothing left

        async def routed() -> Any:
            return (await get_message(stack, row.id))["routing"].get("task_id")

        assert await eventually(routed, within=60)
        # A message that visibly arrived but lost its mark is marked, not sent again.
        async with stack.db.session() as s:
            await s.execute(
                update(MessageRow).where(MessageRow.id == row.id).values(handed_at=None)
            )
        assert await relay_once(stack.db, temporal_client, settings) == 0
        assert (await _stored(stack, CAT)).handed_at is not None

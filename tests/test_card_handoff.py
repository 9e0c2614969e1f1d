"""A card answer is stored, answered promptly, and handed on to Temporal even when that
hand-off hangs or fails.

The scenario harness, killing the Temporal dev server every few steps, saw the correct-forget
story's `POST /v1/cards/{id}/actions` hang for its client's whole 120 s: the answer was
committed, then the route waited on Temporal without a bound (the forget cascade, the task's
`card_answered` update, which waits for a worker). And when such a hand-off failed after the
commit, nothing but the same client's retry ever handed the answer on: a forget the person
confirmed could stay undone. Here the hand-off hangs or fails at exactly that point; the
answer must come back within `handoff_wait_seconds`, and the relay (`api/services/relay.py`)
must finish the hand-off with no client retry, once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from temporalio.client import Client

import api.services.card_effects as card_effects
import api.services.card_handoff as card_handoff
from api.dispatch.memory import request_extraction
from api.services.relay import relay_once
from cards.store import create_card
from lomo import clock
from lomo.db.models import Card, MessageRow
from lomo.ids import new_id
from tests.handoff_support import (
    count_hand_off,
    fail_hand_off,
    hang_hand_off,
    persistent_task,
)
from tests.helpers import eventually, free_port
from tests.stack import Stack, running_stack

BLUE = "Our brand's main colour is blue."
WAIT_S = 1.0  # the request's hand-off bound in these tests
PROMPT_S = 10.0  # "promptly": the bound plus HTTP and a DB round trip, with room to spare


async def _card_row(stack: Stack, card_id: str) -> Card:
    async with stack.db.session() as s:
        card = await s.get(Card, card_id)
    assert card is not None
    return card


async def _answer(stack: Stack, card_id: str, action: str = "confirm") -> tuple[Any, float]:
    t0 = time.monotonic()
    r = await stack.api.post(
        f"/v1/cards/{card_id}/actions",
        json={"action": action},
        headers=stack.auth,
        timeout=PROMPT_S + 20,  # longer than "prompt": a hang shows as a slow answer, not a 500
    )
    return r, time.monotonic() - t0


async def _remember_blue(stack: Stack, client: Client) -> None:
    mid = new_id("msg")
    async with stack.db.session() as s:
        # Handed to the memory workflow here, not through the api: marked, so the relay
        # leaves it alone.
        s.add(MessageRow(id=mid, user_id=stack.user_id, text=BLUE, handed_at=clock.now()))
    await request_extraction(client, stack.settings, stack.user_id, mid)
    await eventually(lambda: _blue_remembered(stack), within=60)


async def _blue_remembered(stack: Stack) -> bool:
    r = await stack.api.get("/v1/memory", headers=stack.auth)
    assert r.status_code == 200, r.text
    return any("blue" in m["content"].lower() for m in r.json()["memories"])


async def _forget_card(stack: Stack) -> str:
    r = await stack.api.post(
        "/v1/memory/forget", json={"text": "our brand's main colour is blue"}, headers=stack.auth
    )
    assert r.status_code == 202, r.text
    return str(r.json()["card_id"])


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_task_card_answer_returns_promptly_while_no_worker_takes_the_wake_up(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """Real Temporal, nothing patched: the card's task workflow runs but no worker polls its
    queue (all killed), so the `card_answered` update waits for one indefinitely."""
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        in_process_worker=False,
        handoff_relay_seconds=0,
        handoff_wait_seconds=WAIT_S,
    ) as stack:
        task_id = new_id("tsk")
        # Started on the stack's queue, where no worker runs: it exists and takes updates,
        # which wait for a worker to accept them.
        handle = await temporal_client.start_workflow(
            "TaskWorkflow", id=f"task:{task_id}", task_queue=task_queue
        )
        async with stack.db.session() as s:
            card = await create_card(
                s, user_id=stack.user_id, kind="confirm", title="Go on?", task_id=task_id
            )
        r, took = await _answer(stack, card.id)
        assert r.status_code == 200, r.text
        assert took < PROMPT_S, f"the answer took {took:.1f} s"
        assert r.json()["status"] == "answered" and r.json()["answer"]["action"] == "confirm"
        row = await _card_row(stack, card.id)
        assert row.status == "answered" and row.handed_at is None  # the wake-up is still owed
        await handle.terminate()


async def test_a_forget_answer_is_stored_and_answered_while_temporal_is_unreachable(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
) -> None:
    """The api's Temporal address is a dead port (the dev server is down): the answer is
    stored and returned, not refused, and the hand-off is left owed."""
    async with running_stack(
        tmp_path,
        db_url,
        f"127.0.0.1:{free_port()}",
        temporal_client,
        task_queue,
        in_process_worker=False,
        handoff_relay_seconds=0,
        handoff_wait_seconds=WAIT_S,
    ) as stack:
        card_id = await _forget_card(stack)
        r, took = await _answer(stack, card_id)
        assert r.status_code == 200, r.text
        assert took < PROMPT_S, f"the answer took {took:.1f} s"
        assert r.json()["status"] == "answered"
        row = await _card_row(stack, card_id)
        assert row.answer == {"action": "confirm", "option_id": None, "text": None}
        assert row.handed_at is None


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_forget_answer_returns_promptly_while_the_cascade_hangs(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The harness's case: the forget cascade's hand-off (the update, then the signal it
    falls back to) never returns while the dev server restarts."""
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        in_process_worker=False,
        handoff_relay_seconds=0,
        handoff_wait_seconds=WAIT_S,
        memory_forget_wait_seconds=60.0,  # the cascade's own bound is not what answers here
    ) as stack:
        card_id = await _forget_card(stack)
        waited = hang_hand_off(monkeypatch, "forget_and_wait", card_effects)
        hang_hand_off(monkeypatch, "request_forget", card_effects)
        r, took = await _answer(stack, card_id)
        assert waited, "the cascade's hand-off was not attempted"
        assert r.status_code == 200, r.text
        assert took < PROMPT_S, f"the answer took {took:.1f} s"
        assert (await _card_row(stack, card_id)).handed_at is None


async def test_the_relay_carries_out_a_forget_whose_hand_off_failed(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The confirmed forget's hand-off fails once after the commit; the client got its
    answer and never sends it again. Only the relay can run the cascade."""
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        embedder="fake",
        handoff_relay_seconds=1.0,
        handoff_wait_seconds=WAIT_S,
    ) as stack:
        await _remember_blue(stack, temporal_client)
        card_id = await _forget_card(stack)
        failed = fail_hand_off(monkeypatch, "forget_and_wait", 1, card_effects)
        r, _ = await _answer(stack, card_id)
        assert failed
        assert r.status_code == 200, r.text
        assert await _blue_remembered(stack)  # not forgotten by the request

        async def forgotten() -> bool:
            return not await _blue_remembered(stack)

        await eventually(forgotten, within=60)
        await eventually(lambda: _handed(stack, card_id), within=30)


async def _handed(stack: Stack, card_id: str) -> bool:
    return (await _card_row(stack, card_id)).handed_at is not None


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_the_relay_wakes_a_task_whose_card_wake_up_failed(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A persistent task waits on its price card; the answer's wake-up fails once (Temporal
    unavailable) and the task would sleep until its card wait re-reads (set far away here).
    The relay sends the wake-up and the task goes on."""
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        handoff_relay_seconds=1.0,
        handoff_wait_seconds=WAIT_S,
        card_wait_seconds=3600.0,
    ) as stack:
        task_id = await persistent_task(stack)

        async def price_card() -> Any:
            t = (await stack.api.get(f"/v1/tasks/{task_id}", headers=stack.auth)).json()
            open_ = [c for c in t["cards"] if c["kind"] == "price" and c["status"] == "open"]
            return open_[0] if open_ and t["status"] == "waiting_user" else None

        card = await eventually(price_card, within=90)
        failed = fail_hand_off(monkeypatch, "card_answered", 1, card_handoff)
        r, _ = await _answer(stack, card["card_id"])
        assert failed and r.status_code == 200, r.text

        async def drafting() -> Any:
            t = (await stack.api.get(f"/v1/tasks/{task_id}", headers=stack.auth)).json()
            return t if any(i["status"] == "done" for i in t["checklist"]) else None

        await eventually(drafting, within=90)
        assert await _handed(stack, card["card_id"])


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_the_relay_does_not_repeat_a_completed_hand_off(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rounds are driven by hand (the loop is off). A card whose hand-off went through is
    not handed on again; one whose mark was lost after its cascade ran is marked, and the
    memory workflow is not asked to forget a second time."""
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        embedder="fake",
        handoff_relay_seconds=0,
    ) as stack:
        await _remember_blue(stack, temporal_client)
        card_id = await _forget_card(stack)
        cascades = count_hand_off(monkeypatch, "forget_and_wait", card_effects)
        signals = count_hand_off(monkeypatch, "request_forget", card_effects)
        r, _ = await _answer(stack, card_id)
        assert r.status_code == 200, r.text
        assert not await _blue_remembered(stack)  # the request waited for the cascade
        assert len(cascades) == 1 and await _handed(stack, card_id)
        settings = stack.settings.model_copy(update={"handoff_relay_seconds": 0.0})
        assert await relay_once(stack.db, temporal_client, settings) == 0
        assert await relay_once(stack.db, temporal_client, settings) == 0
        assert (len(cascades), len(signals)) == (1, 0)
        # The mark lost (the api died right after the cascade): handed on again, the
        # cascade not asked for twice.
        async with stack.db.session() as s:
            await s.execute(update(Card).where(Card.id == card_id).values(handed_at=None))
        assert await relay_once(stack.db, temporal_client, settings) == 1
        assert await _handed(stack, card_id)
        assert (len(cascades), len(signals)) == (1, 0)
        assert await relay_once(stack.db, temporal_client, settings) == 0


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_relay_round_is_not_held_up_by_a_card_whose_task_no_worker_takes(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """Rounds by hand. The first owed card's task has no worker, so its `card_answered`
    update outlives the round's bound; the Temporal client reports that cancelled update
    as its own error, not a timeout, which ended the round (as if Temporal were down) and
    left every later card owed, round after round."""
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        in_process_worker=False,
        handoff_relay_seconds=0,
        handoff_wait_seconds=WAIT_S,
    ) as stack:
        task_id = new_id("tsk")
        stuck = await temporal_client.start_workflow(
            "TaskWorkflow", id=f"task:{task_id}", task_queue=task_queue
        )
        async with stack.db.session() as s:
            first = await create_card(
                s, user_id=stack.user_id, kind="confirm", title="Go on?", task_id=task_id
            )
            later = await create_card(s, user_id=stack.user_id, kind="confirm", title="And?")
        for card_id in (first.id, later.id):
            r, _ = await _answer(stack, card_id)
            assert r.status_code == 200, r.text
        async with stack.db.session() as s:  # the later card's mark was lost
            await s.execute(update(Card).where(Card.id == later.id).values(handed_at=None))
        settings = stack.settings.model_copy(update={"handoff_relay_seconds": 0.0})
        assert await relay_once(stack.db, temporal_client, settings) == 1
        assert await _handed(stack, later.id) and not await _handed(stack, first.id)
        await stuck.terminate()

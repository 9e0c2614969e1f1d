"""Two hand-offs of one confirmed forget card wait for the cascade at once: the card action
(its request still waiting behind a slow extraction) and the relay, which hands the same
card on again because it is not marked handed yet (as after an api crash). Both updates get
the job's outcome, the cascade runs once, a repeat after it ran is answered at once, and
continue-as-new still comes. Before, the first update took the one result and the second
never returned (continue-as-new, which waits for every handler, never came either). Real
api, worker and Temporal dev server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

import memory.writes
from api.dispatch.memory import forget_and_wait, request_extraction, request_forget, workflow_id
from api.services.relay import relay_once
from lomo import clock
from lomo.db.models import Card, MessageRow
from lomo.ids import new_id
from memory.models import ForgetRecord
from memory.services import close_services
from memory.types import MemoryInput
from tests.helpers import eventually
from tests.runtime_support import replay_and_maybe_record
from tests.stack import running_stack
from tests.test_memory_forget_retry import (
    CREAM,
    DownDatabase,
    _forgotten,
    _next_run,
    _start,
)


async def _updates_accepted(handle: Any) -> int:
    events = [ev async for ev in handle.fetch_history_events()]
    accepted = "workflow_execution_update_accepted_event_attributes"
    return sum(1 for ev in events if ev.HasField(accepted))


async def test_two_waits_for_one_forget_share_its_outcome(
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
        embedder="fake",
        # The card action keeps waiting for the cascade (no fallback signal), and the
        # api's own relay is off: the test runs the relay round itself.
        memory_forget_wait_seconds=60.0,
        handoff_wait_seconds=90.0,
        handoff_relay_seconds=0.0,
    ) as st:
        wf_id = workflow_id(st.user_id)
        handle = temporal_client.get_workflow_handle(wf_id)
        await _start(st, temporal_client, MemoryInput(st.user_id, 1.0, 1))
        cascades = DownDatabase(memory.writes.forget, lambda _n: False)  # counts only
        monkeypatch.setattr(memory.writes, "forget", cascades)
        # A long extraction (a slow model) holds the queue.
        gate, entered = asyncio.Event(), asyncio.Event()
        real_extract = memory.writes.extract_message

        async def slow_extract(*args: Any, **kwargs: Any) -> Any:
            entered.set()
            await gate.wait()
            return await real_extract(*args, **kwargs)

        monkeypatch.setattr(memory.writes, "extract_message", slow_extract)
        mid = new_id("msg")
        async with st.db.session() as s:
            s.add(MessageRow(id=mid, user_id=st.user_id, text=CREAM, handed_at=clock.now()))
        await request_extraction(temporal_client, st.settings, st.user_id, mid)
        await asyncio.wait_for(entered.wait(), 30)
        accepted = await _updates_accepted(handle)

        # The person confirms; the card action's update waits behind the extraction.
        r = await st.api.post(
            "/v1/memory/forget", json={"text": "our brand's main colour is blue"}, headers=st.auth
        )
        assert r.status_code == 202, r.text
        card_id = str(r.json()["card_id"])
        action = asyncio.create_task(
            st.api.post(f"/v1/cards/{card_id}/actions", json={"action": "confirm"}, headers=st.auth)
        )
        await eventually(lambda: _at_least(_updates_accepted(handle), accepted + 1))
        # The relay finds the answered card not handed yet and hands it on again: a second
        # `forget_and_wait` for the same card, waiting at the same time.
        relay_settings = st.settings.model_copy(update={"handoff_relay_seconds": 0.001})
        relay = asyncio.create_task(relay_once(st.db, temporal_client, relay_settings))
        await eventually(lambda: _at_least(_updates_accepted(handle), accepted + 2))
        assert not action.done() and not relay.done()
        gate.set()

        r = await asyncio.wait_for(action, 30)
        assert r.status_code == 200, r.text
        assert await asyncio.wait_for(relay, 30) == 1  # the relay's hand-off went through
        async with st.db.session() as s:
            card = await s.get(Card, card_id)
            assert card is not None and card.handed_at is not None
            assert await s.get(ForgetRecord, card_id) is not None
        assert await _forgotten(st)
        assert cascades.calls == 1  # both updates shared the one job
        # A repeat after the job ran (e.g. the api checked the record just before it was
        # written): answered at once from the workflow's outcome, no second cascade.
        repeat = forget_and_wait(temporal_client, st.settings, st.user_id, card_id)
        assert await asyncio.wait_for(repeat, 10) == "forgotten"
        assert cascades.calls == 1

        # Continue-as-new is not held up by a handler: fill the history until Temporal
        # suggests it (400 events on the test server) with forgets of unknown cards.
        first_run = (await handle.describe()).run_id
        for _ in range(300):
            if await _next_run(handle, first_run):
                break
            await request_forget(temporal_client, st.settings, st.user_id, new_id("crd"))
        await eventually(lambda: _next_run(handle, first_run))
        # In the next run the outcome is no longer kept: the cascade finds its record.
        again = forget_and_wait(temporal_client, st.settings, st.user_id, card_id)
        assert await asyncio.wait_for(again, 30) == "forgotten"
        assert await _forgotten(st)
        await replay_and_maybe_record(temporal_client, wf_id, "memory_forget_shared")
    await close_services()


async def _at_least(count: Any, n: int) -> bool:
    return bool(await count >= n)

"""A confirmed forget whose activity failed on every attempt (the DB down longer than the
retry policy) is tried again by the person's MemoryWorkflow itself, after a durable timer,
until it runs, across continue-as-new too. Nothing else would run it: the card is already
marked handed (the relay does not resend it) and no further message brings an extraction
(which runs unexecuted forgets first). And a forget whose update waits behind other work
when Temporal suggests continue-as-new runs (the workflow used to wait for the update,
which waited for its queued job). Real api, worker and Temporal dev server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio import activity
from temporalio.client import Client

import memory.writes
from api.dispatch.memory import request_extraction, request_forget, workflow_id
from lomo import clock
from lomo.db.models import Card, MessageRow
from lomo.ids import new_id
from memory.models import Evidence, ForgetRecord
from memory.services import close_services
from memory.types import MemoryInput
from tests.helpers import eventually
from tests.runtime_support import replay_and_maybe_record
from tests.stack import Stack, running_stack
from workflows.memory import MemoryWorkflow

BLUE = "Our brand's main colour is blue."
CREAM = "Blue with cream white feels softer overall."


class DownDatabase:
    """Stands in for the forget cascade (memory.forget.forget): refuses while `down()` says
    the database is unreachable, then runs the real cascade."""

    def __init__(self, real: Any, down: Any) -> None:
        self.real = real
        self.down = down
        self.calls = 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.down(self.calls):
            raise ConnectionRefusedError("database unreachable")
        return await self.real(*args, **kwargs)


async def _start(st: Stack, client: Client, inp: MemoryInput) -> None:
    """The person's workflow with short limits and one remembered fact."""
    mid = new_id("msg")
    async with st.db.session() as s:
        # Handed over right here (the signal below), so the api's relay leaves it alone.
        s.add(MessageRow(id=mid, user_id=st.user_id, text=BLUE, handed_at=clock.now()))
    await client.start_workflow(
        MemoryWorkflow.run,
        inp,
        id=workflow_id(st.user_id),
        task_queue=st.settings.task_queue,
        start_signal="extract",
        start_signal_args=[mid],
    )

    async def remembered() -> bool:
        r = await st.api.get("/v1/memory", headers=st.auth)
        return r.json()["memories"] != []

    await eventually(remembered)


async def _confirm_forget(st: Stack) -> str:
    r = await st.api.post(
        "/v1/memory/forget", json={"text": "our brand's main colour is blue"}, headers=st.auth
    )
    assert r.status_code == 202, r.text
    card_id = str(r.json()["card_id"])
    r = await st.api.post(
        f"/v1/cards/{card_id}/actions", json={"action": "confirm"}, headers=st.auth
    )
    assert r.status_code == 200, r.text
    return card_id


async def _forgotten(st: Stack) -> bool:
    r = await st.api.get("/v1/memory", headers=st.auth)
    return r.json()["memories"] == []


async def _evidence_count(st: Stack) -> int:
    async with st.db.session() as s:
        return len(list(await s.scalars(select(Evidence.id).where(Evidence.user_id == st.user_id))))


async def test_failed_forget_is_retried_by_the_workflow(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, embedder="fake"
    ) as st:
        # Two attempts per round, the next round half a second later.
        await _start(st, temporal_client, MemoryInput(st.user_id, 0.5, 2))
        evidence = await _evidence_count(st)
        # Down for the first round's two attempts and the next round's first.
        db = DownDatabase(memory.writes.forget, lambda n: n <= 3)
        monkeypatch.setattr(memory.writes, "forget", db)
        card_id = await _confirm_forget(st)
        # The card action was answered with "not yet" and the card counts as handed, so
        # the relay sends nothing again; only the workflow's own retry is left.
        async with st.db.session() as s:
            card = await s.get(Card, card_id)
            assert card is not None and card.handed_at is not None

        await eventually(lambda: _forgotten(st), within=30)
        assert db.calls == 4  # round 1: 2 failed; round 2: 1 failed, 1 ran
        async with st.db.session() as s:
            assert await s.get(ForgetRecord, card_id) is not None
        assert await _evidence_count(st) == evidence  # no message brought it
        await replay_and_maybe_record(
            temporal_client, workflow_id(st.user_id), "memory_forget_retried"
        )
    await close_services()


async def test_failed_forget_survives_continue_as_new(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, embedder="fake"
    ) as st:
        wf_id = workflow_id(st.user_id)
        handle = temporal_client.get_workflow_handle(wf_id)
        # One attempt per round, a round a second.
        await _start(st, temporal_client, MemoryInput(st.user_id, 1.0, 1))
        first_run = (await handle.describe()).run_id
        # The database stays down for as long as the first run lives: the forget can only
        # run if the next run took it over.
        db = DownDatabase(
            memory.writes.forget, lambda _n: activity.info().workflow_run_id == first_run
        )
        monkeypatch.setattr(memory.writes, "forget", db)
        await _confirm_forget(st)
        # Other work fills the history until Temporal suggests continue-as-new (400 events
        # on the test server): forgets of cards that do not exist, each dropped at once. A
        # loaded machine takes several signals per workflow task (fewer events each).
        for _ in range(400):
            if (await handle.describe()).run_id != first_run:
                break
            await request_forget(temporal_client, st.settings, st.user_id, new_id("crd"))
        assert (await handle.describe()).run_id != first_run

        await eventually(lambda: _forgotten(st), within=30)
        assert db.calls > 1  # it failed in the first run, then ran in the next one
        await replay_and_maybe_record(temporal_client, wf_id, "memory_forget_can")
    await close_services()


async def test_forget_awaited_at_continue_as_new_runs(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Continue-as-new waits for the running updates to finish; a `forget_and_wait` that
    arrived while another job ran waits for its own job, still queued, so the workflow
    must run the queue first instead of waiting for the update (which waited forever)."""
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        embedder="fake",
        memory_forget_wait_seconds=1.0,  # the card action gives up waiting early
    ) as st:
        wf_id = workflow_id(st.user_id)
        handle = temporal_client.get_workflow_handle(wf_id)
        await _start(st, temporal_client, MemoryInput(st.user_id, 1.0, 1))
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
        # The person confirms a forget meanwhile: its update waits behind the extraction.
        # The card action stops waiting for it and signals the forget instead, so the
        # answer is handed on (its task would wake now) without the relay.
        card_id = await _confirm_forget(st)
        async with st.db.session() as s:
            card = await s.get(Card, card_id)
            assert card is not None and card.handed_at is not None
        # More arrives until Temporal suggests continue-as-new (400 events on the test
        # server): forgets of cards that do not exist, each dropped when its turn comes.
        for _ in range(200):
            if await _history_length(handle) > 410:
                break
            await request_forget(temporal_client, st.settings, st.user_id, new_id("crd"))
        assert await _history_length(handle) > 410
        first_run = (await handle.describe()).run_id
        gate.set()

        await eventually(lambda: _forgotten(st), within=30)
        await eventually(lambda: _next_run(handle, first_run))
        await replay_and_maybe_record(temporal_client, wf_id, "memory_forget_awaited_can")
    await close_services()


async def _history_length(handle: Any) -> int:
    info = (await handle.describe()).raw_description.workflow_execution_info
    return int(info.history_length)


async def _next_run(handle: Any, first_run: str | None) -> bool:
    return bool((await handle.describe()).run_id != first_run)

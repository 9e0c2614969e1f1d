"""A turn shows as `running` in the LomoTaskStatus search attribute once it has run for
`running_visible_seconds`, from a timer the turn cancels when it ends first (an upsert sent
with the model step's scheduling would hold the step back by its visibility write).
The person's status is unchanged: the turn's first step writes `running` at once. Every
history here is replayed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from llm.types import ModelRequest, ModelResponse
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import add_message, replay_and_maybe_record, start_task, text
from tests.stack import running_stack

UNSCRIPTED = ("extract", "summarize", "summarize_episode", "route")


async def _attrs(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    desc = await handle.describe()
    return {p.key.name: p.value for p in desc.typed_search_attributes}


async def _upserted_statuses(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """LomoTaskStatus of each search-attribute upsert in the history, in order."""
    out = []
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            fields = e.upsert_workflow_search_attributes_event_attributes.search_attributes
            payload = fields.indexed_fields.get("LomoTaskStatus")
            if payload is not None:
                out.append(json.loads(payload.data))
    return out


async def _timers(handle: WorkflowHandle[Any, Any]) -> tuple[int, int, int]:
    counts = {t: 0 for t in ("STARTED", "CANCELED", "FIRED")}
    async for e in handle.fetch_history_events():
        name = EventType.Name(e.event_type)
        for t in counts:
            if name == f"EVENT_TYPE_TIMER_{t}":
                counts[t] += 1
    return counts["STARTED"], counts["CANCELED"], counts["FIRED"]


async def _waiting(handle: WorkflowHandle[Any, Any], turn: int) -> None:
    async def settled() -> Any:
        state: dict[str, Any] = await handle.query("state")
        return state if state["status"] == "waiting_user" and state["turn"] == turn else None

    await eventually(settled, within=60)


async def test_a_short_turn_never_touches_the_search_attribute_with_running(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    provider = ScriptedProvider([text("Which size?"), text("A3 then.")], unscripted=UNSCRIPTED)
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        # Far longer than a scripted turn takes, however loaded the machine.
        tid, handle = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            "Posters",
            kind="persistent",
            running_visible_seconds=600.0,
        )
        await _waiting(handle, 1)
        mid = await add_message(st.db, st.user_id, tid, "A3")
        await handle.execute_update("message", mid)
        await _waiting(handle, 2)
        # The workflow's start, then each turn's end: no `running` between them ...
        assert await _upserted_statuses(handle) == ["running", "waiting_user", "waiting_user"]
        # ... because the second turn's timer was cancelled when the turn ended (the first
        # turn began with the attribute already `running`, from the start: no timer).
        assert await _timers(handle) == (1, 1, 0)
        attrs = await eventually(lambda: _when_waiting(handle))
        assert attrs["LomoTaskKind"] == "persistent"
        await replay_and_maybe_record(temporal_client, handle.id, "turn_running_shown_later")


async def _when_waiting(handle: WorkflowHandle[Any, Any]) -> dict[str, Any] | None:
    attrs = await _attrs(handle)
    return attrs if attrs.get("LomoTaskStatus") == "waiting_user" else None


class _Held:
    """The second turn's model answer, held until the test releases it."""

    def __init__(self, reply: ModelResponse) -> None:
        self.reply = reply
        self.entered, self.release = asyncio.Event(), asyncio.Event()

    async def answer(self, request: ModelRequest) -> ModelResponse:
        self.entered.set()
        await self.release.wait()
        return self.reply


async def test_a_long_turn_shows_running_until_it_ends(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    held = _Held(text("A3 then."))
    provider = ScriptedProvider([text("Which size?"), held.answer], unscripted=UNSCRIPTED)
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            "Posters",
            kind="persistent",
            running_visible_seconds=0.3,
        )
        await _waiting(handle, 1)
        await eventually(lambda: _when_waiting(handle))
        mid = await add_message(st.db, st.user_id, tid, "A3")
        await handle.execute_update("message", mid)
        await asyncio.wait_for(held.entered.wait(), 60)

        async def running() -> dict[str, Any] | None:
            attrs = await _attrs(handle)
            return attrs if attrs.get("LomoTaskStatus") == "running" else None

        # The model step is still held: the operator sees the turn run (a stuck one too).
        attrs = await eventually(running, within=30)
        assert "LomoWaitingSince" not in attrs
        assert not held.release.is_set()
        held.release.set()
        await _waiting(handle, 2)
        assert await _upserted_statuses(handle) == [
            "running",
            "waiting_user",
            "running",
            "waiting_user",
        ]
        assert await _timers(handle) == (1, 0, 1)
        await eventually(lambda: _when_waiting(handle))
        await replay_and_maybe_record(temporal_client, handle.id, "turn_running_shown_late")

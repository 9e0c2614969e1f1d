"""Stop, pause, resume, archive, promote: what the person (and the runtime's limits) can do
to a live task, over HTTP with a real worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from temporalio.client import Client

from lomo.db.models import ModelStep
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import start_task, text, tool_use
from tests.stack import Stack, running_stack

PLAN = {"add": [{"title": "Sketch"}, {"title": "Refine"}]}


async def _task(st: Stack, tid: str) -> dict[str, Any]:
    return (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()  # type: ignore[no-any-return]


async def _status(st: Stack, tid: str, want: str) -> Any:
    t = await _task(st, tid)
    return t if t["status"] == want else None


async def _steps(st: Stack, tid: str) -> int:
    async with st.db.session() as s:
        n = await s.scalar(
            select(func.count()).select_from(ModelStep).where(ModelStep.task_id == tid)
        )
    return int(n or 0)


async def test_a_limit_stop_is_resumed_with_a_raised_limit(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    noop = {"update": []}
    provider = ScriptedProvider(
        [tool_use("update_checklist", PLAN, "tu_0")]
        + [tool_use("update_checklist", noop, f"tu_{i}") for i in range(1, 3)]
        + [tool_use("update_checklist", noop, f"tu_{i}") for i in range(3, 6)]
        + [text("Both steps are planned; over to you?")]
    )
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, _ = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            "Plan",
            kind="persistent",
            max_steps_per_turn=3,
        )
        t = await eventually(lambda: _status(st, tid, "stopped"))
        assert t["status_reason"] == "limit: max_steps_per_turn reached"
        # A runtime stop refuses messages until resumed, with a clear reason.
        r = await st.api.post(f"/v1/tasks/{tid}/messages", json={"text": "hi"}, headers=st.auth)
        assert r.status_code == 409 and "stopped" in r.json()["detail"]
        bad = await st.api.post(
            f"/v1/tasks/{tid}/resume", json={"max_steps_per_turn": 0}, headers=st.auth
        )
        assert bad.status_code == 422
        r = await st.api.post(
            f"/v1/tasks/{tid}/resume", json={"max_steps_per_turn": 10}, headers=st.auth
        )
        assert r.status_code == 200, r.text
        await eventually(lambda: _status(st, tid, "waiting_user"))
        assert await _steps(st, tid) == 7 and provider.remaining == 0


async def test_pause_holds_messages_until_resume_and_archive_closes(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    provider = ScriptedProvider([text("Hello."), text("Got your note.")])
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "Chat", kind="persistent"
        )
        await eventually(lambda: _status(st, tid, "waiting_user"))
        assert (await st.api.post(f"/v1/tasks/{tid}/pause", headers=st.auth)).status_code == 200
        await eventually(lambda: _status(st, tid, "paused"))
        r = await st.api.post(f"/v1/tasks/{tid}/messages", json={"text": "a note"}, headers=st.auth)
        assert r.status_code == 202  # accepted into the inbox, not processed while paused
        mid = r.json()["message_id"]
        assert await _steps(st, tid) == 1
        assert (await st.api.post(f"/v1/tasks/{tid}/resume", headers=st.auth)).status_code == 200

        async def processed() -> Any:
            m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
            return m.get("processed")

        assert (await eventually(processed))["turn"] == 2
        await eventually(lambda: _status(st, tid, "waiting_user"))
        r = await st.api.post(f"/v1/tasks/{tid}/resume", headers=st.auth)
        assert r.status_code == 409  # not paused
        assert (await st.api.post(f"/v1/tasks/{tid}/archive", headers=st.auth)).status_code == 200
        assert await handle.result() == "archived"
        t = await _task(st, tid)
        assert t["status"] == "archived"
        r = await st.api.post(f"/v1/tasks/{tid}/messages", json={"text": "more"}, headers=st.auth)
        assert r.status_code in (404, 409)
        listed = (await st.api.get("/v1/tasks", headers=st.auth)).json()["tasks"]
        assert tid in [x["task_id"] for x in listed]  # archived tasks are kept, not deleted


async def test_promote_turns_a_lightweight_task_persistent_in_place(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    provider = ScriptedProvider([tool_use("update_checklist", PLAN, "tu_p"), text("Planned?")])
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "A quick sketch"
        )
        await eventually(lambda: _status(st, tid, "waiting_user"))
        listed = (await st.api.get("/v1/tasks", headers=st.auth)).json()["tasks"]
        assert tid not in [x["task_id"] for x in listed]  # lightweight: not in the list
        r = await st.api.post(f"/v1/tasks/{tid}/promote", headers=st.auth)
        assert r.status_code == 200 and r.json()["kind"] == "persistent"
        assert (await handle.query("state"))["kind"] == "persistent"
        listed = (await st.api.get("/v1/tasks", headers=st.auth)).json()["tasks"]
        assert tid in [x["task_id"] for x in listed]
        t = await _task(st, tid)
        assert len(t["checklist"]) == 2 and t["turn"] == 1  # same context and journal

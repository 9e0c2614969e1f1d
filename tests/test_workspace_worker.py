"""Shared work edited by the person and a task, over real processes: a real Temporal dev
server, a real worker running the task and its `run_tool` activities, the api over HTTP for
the person, a scripted model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from sqlalchemy import select
from temporalio.client import Client

from llm.types import ModelRequest, ModelResponse
from lomo.db.models import ModelStep, ToolCall
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import last_tool_results, start_task, text, tool_use
from tests.stack import Stack, running_stack
from workspace.notices import notices_for_context

V3 = (
    "# Storyboard\n## Shot 1\nA cat wakes up.\n## Shot 2\nThe cat looks at a bird.\n"
    "## Shot 3\nThe cat walks out of frame.\n"
)
PERSON = ("looks at a bird", "watches the snow")
AGENT = ("walks out of frame", "walks toward the camera")


async def test_abb10_on_a_real_worker(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    box: dict[str, Any] = {}

    def result(request: ModelRequest) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(last_tool_results(request)[0])
        return out

    async def person_saves_v4_then_agent_writes_on_v3(request: ModelRequest) -> ModelResponse:
        assert result(request)["version"] == 3
        st: Stack = box["stack"]
        r = await st.api.put(
            f"/v1/objects/{box['oid']}",
            json={"base_version": 3, "content": {"text": V3.replace(*PERSON)}},
            headers=st.auth,
        )
        assert r.status_code == 200 and r.json()["version"] == 4
        async with st.db.session() as s:
            box["notices"] = await notices_for_context(s, box["task_id"])
        return tool_use(
            "write_object",
            {"object_id": box["oid"], "base_version": 3, "text": V3.replace(*AGENT)},
            "tu_write_v3",
        )

    def rereads_after_refusal(request: ModelRequest) -> ModelResponse:
        box["refusal"] = result(request)
        return tool_use("read_object", {"object_id": box["oid"]}, "tu_reread")

    def writes_on_v4(request: ModelRequest) -> ModelResponse:
        cur = result(request)
        assert cur["version"] == 4
        return tool_use(
            "write_object",
            {"object_id": box["oid"], "base_version": 4, "text": cur["text"].replace(*AGENT)},
            "tu_write_v4",
        )

    provider = ScriptedProvider(
        [
            lambda _: tool_use("read_object", {"object_id": box["oid"]}, "tu_read"),
            person_saves_v4_then_agent_writes_on_v3,
            rereads_after_refusal,
            writes_on_v4,
            text("Shot 3 now walks toward the camera; your snow in shot 2 is kept."),
        ]
    )
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        box["stack"] = st
        r = await st.api.post(
            "/v1/objects",
            json={"type": "document", "name": "storyboard", "content": {"text": "draft"}},
            headers=st.auth,
        )
        oid = box["oid"] = r.json()["object_id"]
        for base, body in ((1, "draft 2"), (2, V3)):
            r = await st.api.put(
                f"/v1/objects/{oid}",
                json={"base_version": base, "content": {"text": body}},
                headers=st.auth,
            )
            assert r.status_code == 200
        tid, _ = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            "Make shot 3 of the storyboard walk toward the camera",
            kind="persistent",
        )
        box["task_id"] = tid

        async def at_v5() -> Any:
            body = (await st.api.get(f"/v1/objects/{oid}", headers=st.auth)).json()
            return body if body["version"] == 5 else None

        body = await eventually(at_v5, within=60)
        assert "watches the snow" in body["content"]["text"]  # the person's v4 change
        assert "walks toward the camera" in body["content"]["text"]  # the agent's change
        assert body["created_by"] == f"task:{tid}:{tid}:1:4:0"
        assert body["task_ids"] == [tid]

        async def turn_over() -> Any:
            t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
            return t["status"] in ("waiting_user", "completed")

        await eventually(turn_over, within=30)
        # The person's v4 reached the task as a notice before its refused write ...
        assert box["notices"] == [
            f"storyboard ({oid}) v3 → v4 (by the person): Shot 2 changed (+1/-1 lines); "
            "re-read it before editing"
        ]
        # ... the v3-based write was refused with the current version and what changed ...
        assert box["refusal"]["code"] == "version_conflict"
        assert box["refusal"]["current_version"] == 4
        assert "Shot 2 changed" in box["refusal"]["error"]
        async with st.db.session() as s:
            calls = {
                c.call_id: c
                for c in await s.scalars(select(ToolCall).where(ToolCall.task_id == tid))
            }
            n_steps = len(list(await s.scalars(select(ModelStep).where(ModelStep.task_id == tid))))
            assert await notices_for_context(s, tid) == []  # it has seen v5, its own
        # ... and the journal records each call once, under its call_id.
        assert [calls[f"{tid}:1:{i}:0"].status for i in range(1, 5)] == [
            "done",
            "error",
            "done",
            "done",
        ]
        assert n_steps == 5 and provider.remaining == 0
        # A person's edit never wakes the agent by itself.
        r = await st.api.put(
            f"/v1/objects/{oid}",
            json={"base_version": 5, "content": {"text": body["content"]["text"] + "\nEnd."}},
            headers=st.auth,
        )
        assert r.status_code == 200
        await asyncio.sleep(1.5)
        async with st.db.session() as s:
            after = len(list(await s.scalars(select(ModelStep).where(ModelStep.task_id == tid))))
            assert after == n_steps
            notes = await notices_for_context(s, tid)
        assert notes == [
            f"storyboard ({oid}) v5 → v6 (by the person): Shot 3 changed (+2/-0 lines); "
            "re-read it before editing"
        ]

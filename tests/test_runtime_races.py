"""Races the runtime must survive: a stop against a job's completion (both orders), the
same client message twice at once, and a message that arrives while the model thinks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from temporalio.client import Client

from llm.types import ModelRequest, ModelResponse
from lomo.db.models import GenerationOrder, MessageRow, ModelStep, ToolCall
from lomo.signing import SIGNATURE_HEADER, sign
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import start_task, text, tool_use
from tests.stack import Stack, running_stack


async def _events(st: Stack) -> list[dict[str, Any]]:
    ev = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
    return [json.loads(x[6:]) for x in ev.text.splitlines() if x.startswith("data: ")]


async def _callback(st: Stack, job_id: str) -> None:
    """Deliver the job's real final state as the upstream would, signed."""
    job = (await st.sim.get(f"/jobs/{job_id}")).json()
    body = json.dumps(
        {
            "job_id": job_id,
            "status": job["status"],
            "progress": 1.0,
            "seq": 99,
            "result_url": job.get("result_url"),
        }
    ).encode()
    secret = st.settings.callback_secret.get_secret_value()
    r = await st.api.post(
        "/v1/generation/callbacks",
        content=body,
        headers={SIGNATURE_HEADER: sign(secret, body), "content-type": "application/json"},
    )
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("first", ["stop", "completion"])
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # one backend: slow
async def test_stop_races_completion(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    first: str,
) -> None:
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        generation_wait_seconds=300.0,
    ) as st:
        # Callbacks are ours to deliver, at the moment the race needs.
        await st.sim.post("/sim/faults", json={"drop_callbacks": True})
        r = await st.api.post(
            "/v1/messages", json={"text": "Generate an image of a red tabby cat"}, headers=st.auth
        )
        mid = r.json()["message_id"]

        async def submitted() -> Any:
            async with st.db.session() as s:
                m = await s.get(MessageRow, mid)
                if m is None or not m.task_id:
                    return None
                o = await s.scalar(
                    select(GenerationOrder).where(GenerationOrder.task_id == m.task_id)
                )
                return o if o is not None and o.upstream_job_id else None

        order = await eventually(submitted, within=60)
        tid, job_id = order.task_id, order.upstream_job_id

        async def job_finished() -> Any:
            j = (await st.sim.get(f"/jobs/{job_id}")).json()
            return j["status"] == "succeeded"

        await eventually(job_finished, within=60)
        stop = st.api.post(f"/v1/tasks/{tid}/stop", headers=st.auth)
        if first == "stop":
            assert (await stop).status_code == 200
            await _callback(st, job_id)
        else:
            await _callback(st, job_id)
            resp = await stop  # right behind it: the wake may have begun, or not
            assert resp.status_code in (200, 409)
        handle = temporal_client.get_workflow_handle(f"task:{tid}")
        result = await handle.result()
        async with st.db.session() as s:
            orders = list(
                await s.scalars(select(GenerationOrder).where(GenerationOrder.task_id == tid))
            )
            ran_after = await s.scalar(
                select(func.count())
                .select_from(ToolCall)
                .where(ToolCall.task_id == tid, ToolCall.status != "planned")
                .where(ToolCall.call_id != f"{tid}:1:1:0")
            )
        assert len(orders) == 1 and orders[0].status == "succeeded" and orders[0].object_id
        assert ran_after == 0  # nothing acted after the stop
        events = await _events(st)
        mine = [e for e in events if e["data"].get("task_id") == tid]
        assert [e["type"] for e in mine].count("generation.completed") == 1
        if first == "stop":
            assert result == "stopped"
            stopped_at = next(
                i
                for i, e in enumerate(mine)
                if e["type"] == "task.status" and e["data"]["status"] == "stopped"
            )
            # Only the runtime speaks after the stop (it says the job had finished and what
            # it cost); the model is not woken.
            after = [e for e in mine[stopped_at:] if e["type"] == "task.reply"]
            assert all(e["data"].get("by") == "runtime" for e in after), after
        else:
            # The completion was first: the wake may have finished the task before the stop
            # arrived; either way the asset is kept and nothing runs twice.
            assert result in ("stopped", "completed")
        t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
        assert t["artifacts"] == [orders[0].object_id]


async def test_duplicate_client_message_is_processed_once(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    provider = ScriptedProvider([text("Hello, what shall we make?"), text("Noted.")] * 3)
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, _ = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            "Let's plan a campaign",
            kind="persistent",
        )

        async def waiting_user() -> Any:
            t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
            return t["status"] == "waiting_user"

        await eventually(waiting_user)
        body = {"text": "Use a retro style", "client_message_id": "c-42"}
        replies = await asyncio.gather(
            *(
                st.api.post(f"/v1/tasks/{tid}/messages", json=body, headers=st.auth)
                for _ in range(5)
            )
        )
        assert all(r.status_code == 202 for r in replies), [r.text for r in replies]
        assert len({r.json()["message_id"] for r in replies}) == 1
        mid = replies[0].json()["message_id"]

        async def processed() -> Any:
            m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
            return m.get("processed")

        assert await eventually(processed) == {"task_id": tid, "turn": 2, "step": 1}
        await eventually(waiting_user)
        async with st.db.session() as s:
            n_msgs = await s.scalar(
                select(func.count()).select_from(MessageRow).where(MessageRow.task_id == tid)
            )
            steps = list(await s.scalars(select(ModelStep).where(ModelStep.task_id == tid)))
        assert n_msgs == 2 and [(x.turn, x.step) for x in steps] == [(1, 1), (2, 1)]
        seen = [r for r in provider.requests if "Use a retro style" in json.dumps(str(r))]
        assert len(seen) == 1


async def test_message_during_inference_goes_to_the_next_step(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    thinking = asyncio.Event()
    release = asyncio.Event()

    async def slow_first(request: ModelRequest) -> ModelResponse:
        thinking.set()
        await release.wait()
        return tool_use("update_checklist", {"add": [{"title": "Sketch ideas"}]}, "tu_1")

    provider = ScriptedProvider([slow_first, text("Got it, warmer tones."), text("ok")])
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, _ = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "Plan a poster", kind="persistent"
        )
        await asyncio.wait_for(thinking.wait(), 30)
        r = await st.api.post(
            f"/v1/tasks/{tid}/messages", json={"text": "make it warmer"}, headers=st.auth
        )
        late = r.json()["message_id"]
        release.set()

        async def processed() -> Any:
            m = (await st.api.get(f"/v1/messages/{late}", headers=st.auth)).json()
            return m.get("processed")

        where = await eventually(processed)
        assert (where["turn"], where["step"]) == (1, 2)  # the next step, not the running one
        first_request = json.dumps(str(provider.requests[0]))
        assert "make it warmer" not in first_request
        assert "make it warmer" in json.dumps(str(provider.requests[1]))

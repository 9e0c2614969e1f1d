"""`POST /v1/ag-ui`: runs told in the AG-UI protocol, each stream checked event by event
with ag-ui-validate (the protocol's conformance validator)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui_validate.pytest_plugin import assert_valid_agui
from sqlalchemy import func, select
from temporalio.client import Client

from lomo.db.models import MessageRow
from tests.stack import Stack, running_stack
from tests.test_api_errors import assert_error

CAT = "Generate an image of a red tabby cat"


def run_input(text: str | None, thread: str = "main", **extra: Any) -> dict[str, Any]:
    messages = [{"id": f"m-{uuid.uuid4()}", "role": "user", "content": text}] if text else []
    return {
        "threadId": thread,
        "runId": f"run-{uuid.uuid4()}",
        "messages": messages,
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
        **extra,
    }


async def agui_run(
    st: Stack, body: dict[str, Any], headers: dict[str, str]
) -> list[dict[str, Any]]:
    raw = ""
    try:
        async with st.api.stream("POST", "/v1/ag-ui", json=body, headers=headers, timeout=60) as r:
            assert r.status_code == 200, await r.aread()
            async for chunk in r.aiter_text():
                raw += chunk
    except httpx.ReadTimeout:
        raise AssertionError(f"the run did not end; it sent: {raw}") from None
    events = [json.loads(x[6:]) for x in raw.splitlines() if x.startswith("data: ")]
    return events


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


async def test_a_picture_request_runs_from_start_to_finish(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        body = run_input(CAT)
        events = await agui_run(st, body, st.auth)
        assert_valid_agui(events)
        kinds = types(events)
        assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED", kinds
        assert events[-1].get("outcome", {"type": "success"})["type"] == "success", events[-1]
        for must in (
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "STATE_SNAPSHOT",
        ):
            assert must in kinds, (must, kinds)
        snapshot = next(e for e in events if e["type"] == "STATE_SNAPSHOT")["snapshot"]
        assert snapshot["task_id"].startswith("tsk")
        final = [e for e in events if e["type"] == "STATE_DELTA"]
        assert any(
            op["path"] == "/status" and op["value"] == "completed"
            for e in final
            for op in e["delta"]
        ), final

        # The same input again tells the same run from the log and sends nothing twice.
        events2 = await agui_run(st, body, st.auth)
        assert_valid_agui(events2)
        text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        text2 = "".join(e["delta"] for e in events2 if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert text and text2 == text
        async with st.db.session() as s:
            n = await s.scalar(select(func.count()).select_from(MessageRow))
        assert n == 1


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_price_card_interrupts_and_only_the_person_resumes(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        r = await st.api.post("/v1/tokens", json={"name": "agent ui"}, headers=st.auth)
        api = {"Authorization": f"Bearer {r.json()['token']}"}
        events = await agui_run(st, run_input(CAT), api)  # an API client: asks the price
        assert_valid_agui(events)
        end = events[-1]
        assert end["type"] == "RUN_FINISHED" and end["outcome"]["type"] == "interrupt", end
        (interrupt,) = end["outcome"]["interrupts"]
        assert interrupt["reason"] == "price"
        task_id = next(e for e in events if e["type"] == "STATE_SNAPSHOT")["snapshot"]["task_id"]

        resume = [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"action": "confirm"}}
        ]
        refused = await st.api.post(
            "/v1/ag-ui", json=run_input(None, task_id, resume=resume), headers=api
        )
        assert_error(refused, 403, "forbidden")  # a program cannot approve spending

        events = await agui_run(st, run_input(None, task_id, resume=resume), st.auth)
        assert_valid_agui(events)
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        assert events[-1].get("outcome", {"type": "success"})["type"] == "success"
        assert "TOOL_CALL_RESULT" in types(events)


async def test_bad_inputs_are_refused_before_anything_runs(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        assert_error(await st.api.post("/v1/ag-ui", json=run_input(None), headers=st.auth), 400)
        assert_error(
            await st.api.post("/v1/ag-ui", json={"threadId": "main"}, headers=st.auth), 422
        )
        assert_error(
            await st.api.post("/v1/ag-ui", json=run_input(CAT, "tsk_nope"), headers=st.auth), 404
        )
        assert_error(await st.api.post("/v1/ag-ui", json=run_input(CAT)), 401)
        async with st.db.session() as s:
            assert await s.scalar(select(func.count()).select_from(MessageRow)) == 0

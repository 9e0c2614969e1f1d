"""The AG-UI endpoint driven by the official client: `@ag-ui/client`'s `HttpAgent` in Node
(tests/agui_client/run.mjs, installed from npm by `make test`) runs a picture request and
an interrupted run it resumes, and ends with the messages and state the stream meant."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tests.stack import Stack, running_stack

CLIENT = Path(__file__).parent / "agui_client"
CAT = "Generate an image of a red tabby cat"


def _client_ready() -> bool:
    return shutil.which("node") is not None and (CLIENT / "node_modules" / "@ag-ui").is_dir()


async def drive(st: Stack, token: str, app_token: str | None = None) -> list[dict[str, Any]]:
    if not _client_ready():
        if os.environ.get("CI") == "true":
            raise AssertionError("the AG-UI client is not installed (make agui-client)")
        pytest.skip("node or @ag-ui/client missing (make agui-client)")
    args = [
        f"{str(st.api.base_url).rstrip('/')}/v1/ag-ui",
        token,
        CAT,
        *([app_token] if app_token else []),
    ]
    proc = await asyncio.create_subprocess_exec(
        "node",
        "run.mjs",
        *args,
        cwd=CLIENT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, err.decode()
    runs: list[dict[str, Any]] = json.loads(out)
    for r in runs:
        assert r["failed"] is None, (r["failed"], err.decode())
    return runs


def _token(st: Stack) -> str:
    return st.auth["Authorization"].removeprefix("Bearer ")


async def test_the_official_client_runs_a_picture_request(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        (run,) = await drive(st, _token(st))
        kinds = [e["type"] for e in run["events"]]
        assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED", kinds
        assert run["state"]["status"] == "completed" and len(run["state"]["artifacts"]) == 1
        said = [m for m in run["messages"] if m["role"] == "assistant" and m.get("content")]
        thread = (await st.api.get("/v1/thread", headers=st.auth)).json()["items"]
        replies = [i["text"] for i in thread if i["type"] == "task.reply"]
        assert said and [m["content"] for m in said] == replies  # streamed == stored text
        calls = [c for m in run["messages"] for c in m.get("toolCalls") or []]
        assert [c["function"]["name"] for c in calls] == ["generate_image"]
        assert any(m["role"] == "tool" for m in run["messages"])  # its result
        assert run["pendingInterrupts"] == []


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_the_official_client_resumes_an_interrupted_run(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        r = await st.api.post("/v1/tokens", json={"name": "ag-ui app"}, headers=st.auth)
        first, second = await drive(st, r.json()["token"], _token(st))
        end = first["events"][-1]
        assert end["type"] == "RUN_FINISHED" and end["outcome"]["type"] == "interrupt", end
        assert [i["reason"] for i in first["pendingInterrupts"]] == ["price"]
        assert second["pendingInterrupts"] == []
        assert second["state"]["status"] == "completed"
        assert len(second["state"]["artifacts"]) == 1

"""The live SSE stream (resumable) and the main thread's timeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from tests.stack import Stack, running_stack
from tests.test_slice import run_cat_slice


async def _read_stream(st: Stack, last_id: int | None, n: int) -> list[dict[str, Any]]:
    headers = dict(st.auth)
    if last_id is not None:
        headers["Last-Event-ID"] = str(last_id)
    got: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=str(st.api.base_url), timeout=30) as c:
        async with c.stream("GET", "/v1/events", headers=headers) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            ids: list[int] = []
            async for line in r.aiter_lines():
                if line.startswith("id: "):
                    ids.append(int(line[4:]))
                if line.startswith("data: "):
                    got.append(json.loads(line[6:]))
                    assert got[-1]["seq"] == ids[-1]
                    if len(got) == n:
                        break
    return got


async def test_live_stream_resumes_and_thread_shows_the_conversation(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        task = await run_cat_slice(st, "Generate an image of a red tabby cat")
        first = await _read_stream(st, None, 4)
        assert [e["seq"] for e in first] == [1, 2, 3, 4]
        rest = await _read_stream(st, 4, 3)
        assert [e["seq"] for e in rest] == [5, 6, 7]  # nothing repeated, nothing skipped
        items = (await st.api.get("/v1/thread", headers=st.auth)).json()["items"]
        kinds = [i["type"] for i in items]
        assert kinds[0] == "message.received"
        assert items[0]["text"] == "Generate an image of a red tabby cat"
        assert "task.created" in kinds and kinds[-1] in ("task.status", "task.reply")
        assert any(i.get("task_id") == task["task_id"] for i in items)
        after = items[0]["seq"]
        later = (await st.api.get(f"/v1/thread?after={after}", headers=st.auth)).json()["items"]
        assert [i["seq"] for i in later] == [i["seq"] for i in items[1:]]

"""A step's reply streams to the person: the SDK's streaming API against the stand-in's
server-sent events, deltas in the event log (never in workflow history) with the step and
attempt, a retried attempt's partial text replaced, and the final text stored once."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from temporalio.client import Client

from journal.drafts import DELTA_EVENT, shown_text
from llm.anthropic_provider import AnthropicProvider
from llm.streaming import Paced, TextSink, pieces
from llm.types import (
    Message,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from standin.model import OfflineModel
from standin.server import create_standin_app
from tests.helpers import ThreadServer, eventually
from tests.stack import Stack, running_stack

LONG = (
    "I am sketching three directions for the festival poster: a brass section in warm "
    "ochre, a night skyline with neon type, and a minimal layout built around one saxophone. "
    "They will appear here as they finish."
)


class StepScript:
    """Task steps answer LONG (streamed through `Paced`); everything else is the offline
    model. `fail_first`: the first task step streams part of its text, then fails."""

    name = "script"

    def __init__(self, fail_first: bool = False) -> None:
        self.offline = OfflineModel()
        self.fail_first = fail_first
        self.steps = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.purpose != "task_step":
            return await self.offline.complete(request)
        return ModelResponse([TextBlock(LONG)], "end_turn", Usage(10, 10))

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        if request.purpose != "task_step":
            return await self.offline.complete(request)
        self.steps += 1
        if self.fail_first and self.steps == 1:
            for piece in list(pieces("The first attempt says something else entirely"))[:3]:
                await on_text(piece)
            raise RuntimeError("the connection broke mid-stream")
        return await Paced(self, 4000).stream(request, on_text)


async def _events(st: Stack) -> list[dict[str, Any]]:
    r = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
    return [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: ")]


async def _start(st: Stack) -> str:
    text = {"text": "Plan a poster series for a jazz festival, three directions please"}
    mid = (await st.api.post("/v1/messages", json=text, headers=st.auth)).json()["message_id"]

    async def replied() -> Any:
        events = await _events(st)
        return events if any(e["type"] == "task.reply" for e in events) else None

    await eventually(replied, within=60)
    m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
    return str(m["routing"]["task_id"])


async def test_sdk_streams_text_and_tool_input_from_the_standin() -> None:
    answer = ModelResponse(
        [TextBlock(LONG), ToolUseBlock("toolu_1", "generate", {"prompt": "a fox " * 30})],
        "tool_use",
        Usage(5, 7),
    )

    async def responder(_: ModelRequest) -> ModelResponse:
        return answer

    request = ModelRequest(
        system=[],
        messages=[Message("user", [TextBlock("hi")])],
        tools=[ToolSpec("generate", "makes a picture", {"type": "object"})],
    )
    with ThreadServer(create_standin_app(responder)) as server:
        provider = AnthropicProvider(api_key="k", model="claude-test", base_url=server.url)
        got: list[str] = []

        async def sink(text: str) -> None:
            got.append(text)

        try:
            streamed = await provider.stream(request, sink)
            whole = await provider.complete(request)
        finally:
            await provider.aclose()
    assert len(got) > 5 and "".join(got) == LONG  # in pieces, as they arrived
    assert streamed.content == whole.content == answer.content
    assert streamed.stop_reason == "tool_use" and streamed.usage.output_tokens == 7


async def test_reply_streams_into_the_event_log_before_the_final_text(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        provider=StepScript(),
        stream_flush_seconds=0.0,
    ) as st:
        task_id = await _start(st)
        events = await _events(st)
    deltas = [e for e in events if e["type"] == DELTA_EVENT]
    reply = next(e for e in events if e["type"] == "task.reply")
    assert reply["data"]["task_id"] == task_id and reply["data"]["text"] == LONG
    assert len(deltas) > 5, deltas
    data = [d["data"] for d in deltas]
    assert {(d["task_id"], d["turn"], d["step"], d["attempt"]) for d in data} == {
        (task_id, reply["data"]["turn"], reply["data"]["step"], 1)
    }
    offsets = [d["offset"] for d in data]
    assert offsets == [sum(len(x["text"]) for x in data[:i]) for i in range(len(data))]
    assert shown_text(data) == LONG
    assert max(d["seq"] for d in deltas) < reply["seq"]  # streamed before the final text


async def test_a_reconnect_replays_the_reply_so_far(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        provider=StepScript(),
        stream_flush_seconds=0.0,
    ) as st:
        await _start(st)
        deltas = [e for e in await _events(st) if e["type"] == DELTA_EVENT]
        # A client that saw the first three deltas, then lost the stream.
        seen = deltas[2]["seq"]
        r = await st.api.get(
            "/v1/events", params={"once": "true"}, headers={**st.auth, "Last-Event-ID": str(seen)}
        )
        again = [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: ")]
    rest = [e["data"] for e in again if e["type"] == DELTA_EVENT]
    assert rest == [d["data"] for d in deltas[3:]]
    assert shown_text([d["data"] for d in deltas[:3]] + rest) == shown_text(
        [d["data"] for d in deltas]
    )


async def test_a_retried_attempt_replaces_the_partial_text(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    script = StepScript(fail_first=True)
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        provider=script,
        stream_flush_seconds=0.0,
    ) as st:
        task_id = await _start(st)
        events = await _events(st)
        history = await _history_text(st, temporal_client)
    data = [e["data"] for e in events if e["type"] == DELTA_EVENT]
    assert {d["attempt"] for d in data} == {1, 2}
    assert "The first attempt" in "".join(d["text"] for d in data if d["attempt"] == 1)
    assert shown_text(data) == LONG  # the retry's text, not both
    assert [e["data"]["text"] for e in events if e["type"] == "task.reply"] == [LONG]
    assert f'"task_id":"{task_id}"' in history  # the payloads were decoded
    assert "The first attempt" not in history  # deltas never enter workflow history


async def _history_text(st: Stack, client: Client) -> str:
    """Every workflow's history with its payloads decoded, as text."""
    out: list[str] = []
    async for wf in client.list_workflows(f"TaskQueue = '{st.settings.task_queue}'"):
        history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        _payloads(json.loads(history.to_json()), out)
    return "\n".join(out)


def _payloads(node: Any, out: list[str]) -> None:
    if isinstance(node, dict):
        if "metadata" in node and isinstance(node.get("data"), str):
            out.append(base64.b64decode(node["data"]).decode(errors="replace"))
        for v in node.values():
            _payloads(v, out)
    elif isinstance(node, list):
        for v in node:
            _payloads(v, out)

"""The cat slice through the real AnthropicProvider (official SDK) against the local stand-in."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from llm.anthropic_provider import AnthropicProvider
from llm.types import ModelRequest, ModelResponse, ToolUseBlock
from standin.model import OfflineModel
from standin.server import create_standin_app
from tests.helpers import ThreadServer
from tests.stack import running_stack
from tests.test_slice import run_cat_slice


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_cat_slice_over_anthropic_standin(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    model = OfflineModel()
    purposes: list[str] = []

    async def responder(request: ModelRequest) -> ModelResponse:
        # The stand-in reads the purpose from the provider's x-lomo-purpose header.
        purposes.append(request.purpose)
        resp = await model.complete(request)
        # Not marked as the answer: the tool's result and the job's end go back to the
        # model, so tool results and cache reads travel the wire too.
        for block in resp.content:
            if isinstance(block, ToolUseBlock):
                block.input.pop("present_when_done", None)
        return resp

    app = create_standin_app(responder)
    with ThreadServer(app) as server:
        provider = AnthropicProvider(api_key="test-key", model="claude-test", base_url=server.url)
        try:
            async with running_stack(
                tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
            ) as st:
                task = await run_cat_slice(st, "Generate an image of a red tabby cat")
                assert task["status"] == "completed"
                assert len(task["artifacts"]) == 1
                blob = await st.api.get(f"/v1/objects/{task['artifacts'][0]}/blob", headers=st.auth)
                assert blob.status_code == 200
        finally:
            await provider.aclose()

    bodies = app.state.requests
    assert len(bodies) >= 3, bodies
    assert len(purposes) == len(bodies)
    # Memory extraction runs beside the task (its own workflow), so it may come first.
    assert purposes.count("extract") == 1, purposes
    steps = [p for p in purposes if p != "extract"]
    assert steps[0] == "route" and set(steps[1:]) == {"task_step"}, purposes
    assert all(b["model"] == "claude-test" for b in bodies)

    def has_tool_result(body: dict) -> bool:  # type: ignore[type-arg]
        return any(
            isinstance(m.get("content"), list)
            and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in m["content"])
            for m in body["messages"]
        )

    first_result = next((i for i, b in enumerate(bodies) if has_tool_result(b)), None)
    assert first_result is not None and first_result > 0, bodies
    # Prompt caching reached the wire: the stand-in saw cache_control and answered reads.
    assert app.state.prompt_cache

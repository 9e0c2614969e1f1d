"""Domain tools reach the real Messages API as plain tool lists unless the deferred-tools
beta is known to work; a refusal of the beta falls back to plain lists within the same
call. Through the official SDK against the local stand-in, with its fault switch making it
refuse the beta as an API without it would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from llm.anthropic_provider import DEFERRED_TOOLS_BETA, AnthropicProvider
from llm.types import (
    Message,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from lomo.errors import ModelError
from standin.server import create_standin_app
from tests.helpers import ThreadServer

SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
CORE = ToolSpec("load_tools", "Load a domain's tools", SCHEMA, cache=True)
IMAGE = ToolSpec("generate_image", "Make an image", SCHEMA, deferred=True)
VIDEO = ToolSpec("generate_video", "Make a video", SCHEMA, deferred=True)


def _request() -> ModelRequest:
    """A step after `load_tools(image)`: the image tools are referenced, video is not."""
    return ModelRequest(
        system=[SystemBlock("You make things.")],
        messages=[
            Message("user", [TextBlock("Draw a red fox")]),
            Message("assistant", [ToolUseBlock("toolu_1", "load_tools", {"domain": "image"})]),
            Message("user", [ToolResultBlock("toolu_1", "", tool_refs=["generate_image"])]),
        ],
        tools=[CORE, IMAGE, VIDEO],
    )


class _Server:
    def __init__(self) -> None:
        self.seen: list[ModelRequest] = []

        async def answer(request: ModelRequest) -> ModelResponse:
            self.seen.append(request)
            return ModelResponse(content=[TextBlock("A fox, coming up.")], stop_reason="end_turn")

        self.app = create_standin_app(answer)


@pytest.fixture
def server() -> Iterator[tuple[_Server, str]]:
    srv = _Server()
    with ThreadServer(srv.app) as running:
        yield srv, running.url


def _tools(body: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(t["name"], bool(t.get("defer_loading"))) for t in body.get("tools", [])]


async def test_plain_tool_lists_by_default(server: tuple[_Server, str]) -> None:
    srv, url = server
    provider = AnthropicProvider(api_key="k", model="claude-test", base_url=url)
    srv.app.state.refuse_betas = True  # an API without the beta answers this call all the same
    try:
        resp = await provider.complete(_request())
    finally:
        await provider.aclose()
    assert resp.text == "A fox, coming up."
    assert srv.app.state.betas == [""]
    body = srv.app.state.requests[0]
    # The core tools and the loaded domain's tools, plainly; the unloaded domain not at all.
    assert _tools(body) == [("load_tools", False), ("generate_image", False)]
    result = body["messages"][2]["content"][0]
    assert result["content"] == "Loaded tools: generate_image."
    assert srv.seen[0].tools[1].name == "generate_image"


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_refused_beta_falls_back_to_plain_lists_in_the_same_step(
    server: tuple[_Server, str], streamed: bool
) -> None:
    srv, url = server
    srv.app.state.refuse_betas = True
    provider = AnthropicProvider(
        api_key="k", model="claude-test", base_url=url, deferred_tools=True
    )
    deltas: list[str] = []

    async def sink(text: str) -> None:
        deltas.append(text)

    try:
        step = _request()
        resp = await (provider.stream(step, sink) if streamed else provider.complete(step))
        assert resp.text == "A fox, coming up."
        if streamed:
            assert "".join(deltas) == resp.text
        # The first attempt used the beta and was refused; the same call went plain.
        assert srv.app.state.betas == [DEFERRED_TOOLS_BETA, ""]
        refused, plain = srv.app.state.requests
        assert ("generate_video", True) in _tools(refused)
        assert _tools(plain) == [("load_tools", False), ("generate_image", False)]
        assert len(srv.seen) == 1  # the model answered once: the refused call never reached it
        # Known not to work now: the next step goes plain at once.
        await provider.complete(_request())
        assert srv.app.state.betas == [DEFERRED_TOOLS_BETA, "", ""]
    finally:
        await provider.aclose()


async def test_the_deferred_path_where_the_beta_works(server: tuple[_Server, str]) -> None:
    srv, url = server
    provider = AnthropicProvider(
        api_key="k", model="claude-test", base_url=url, deferred_tools=True
    )
    try:
        await provider.complete(_request())
    finally:
        await provider.aclose()
    assert srv.app.state.betas == [DEFERRED_TOOLS_BETA]
    body = srv.app.state.requests[0]
    assert ("generate_video", True) in _tools(body)
    refs = body["messages"][2]["content"][0]["content"]
    assert refs == [{"type": "tool_reference", "tool_name": "generate_image"}]


async def test_another_bad_request_is_not_mistaken_for_a_refused_beta(
    server: tuple[_Server, str],
) -> None:
    srv, url = server
    provider = AnthropicProvider(
        api_key="k", model="claude-test", base_url=url, deferred_tools=True
    )
    bad = _request()
    bad.max_tokens = 0  # refused for itself, not for the beta
    try:
        with pytest.raises(ModelError, match="max_tokens"):
            await provider.complete(bad)
    finally:
        await provider.aclose()
    assert srv.app.state.betas == [DEFERRED_TOOLS_BETA]
    assert provider.deferred_tools

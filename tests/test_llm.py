"""The model layer: AnthropicProvider against the stand-in server over real HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from pydantic import SecretStr

from activities.registry import build_provider
from llm.anthropic_provider import AnthropicProvider
from llm.streaming import Paced
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
from lomo.errors import ConfigError, ModelError
from standin.scripted import ScriptedProvider
from standin.server import create_standin_app
from tests.helpers import free_port


class Script:
    """A responder whose answers tests set per test; it records what it was asked."""

    def __init__(self) -> None:
        self.responses: list[ModelResponse | Exception] = []
        self.seen: list[ModelRequest] = []

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        self.seen.append(request)
        step = self.responses.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


@dataclass
class Standin:
    app: FastAPI
    script: Script
    base_url: str
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture(scope="module")
def server() -> Iterator[Standin]:
    script = Script()
    app = create_standin_app(script)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("stand-in server did not start")
        time.sleep(0.05)
    yield Standin(app=app, script=script, base_url=base_url, requests=app.state.requests)
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def standin(server: Standin) -> Standin:
    server.script.responses.clear()
    server.script.seen.clear()
    server.requests.clear()
    server.app.state.prompt_cache.clear()
    return server


def _provider(standin: Standin) -> AnthropicProvider:
    return AnthropicProvider(api_key="test-key", model="claude-test", base_url=standin.base_url)


WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


async def test_tool_use_round_trip(standin: Standin) -> None:
    provider = _provider(standin)
    standin.script.responses += [
        ModelResponse(
            content=[
                TextBlock(text="Let me look."),
                ToolUseBlock(id="toolu_1", name="get_weather", input={"city": "Berlin"}),
            ],
            stop_reason="tool_use",
        ),
        ModelResponse(content=[TextBlock(text="Sunny.")], stop_reason="end_turn"),
    ]
    first_messages = [Message(role="user", content=[TextBlock(text="Weather in Berlin?")])]
    req = ModelRequest(
        system=[SystemBlock(text="You are helpful.")],
        messages=first_messages,
        tools=[WEATHER],
        purpose="route",
    )
    first = await provider.complete(req)
    assert first.stop_reason == "tool_use"
    assert first.text == "Let me look."
    assert first.tool_uses == [
        ToolUseBlock(id="toolu_1", name="get_weather", input={"city": "Berlin"})
    ]
    assert first.model == "claude-test"
    assert standin.script.seen[0].purpose == "route"
    assert standin.script.seen[0].tools == [WEATHER]

    follow_up = ModelRequest(
        system=req.system,
        messages=[
            *first_messages,
            Message(role="assistant", content=list(first.content)),
            Message(
                role="user",
                content=[ToolResultBlock(tool_use_id="toolu_1", content="boom", is_error=True)],
            ),
        ],
        tools=[WEATHER],
    )
    second = await provider.complete(follow_up)
    assert second.text == "Sunny."
    assert second.stop_reason == "end_turn"

    assert len(standin.requests) == 2
    body = standin.requests[1]
    assert body["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "get_weather",
        "input": {"city": "Berlin"},
    }
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom", "is_error": True}
    ]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    seen = standin.script.seen[1].messages[2].content
    assert seen == [ToolResultBlock(tool_use_id="toolu_1", content="boom", is_error=True)]
    await provider.aclose()


async def test_prompt_cache_creation_then_read(standin: Standin) -> None:
    provider = _provider(standin)
    standin.script.responses += [
        ModelResponse(content=[TextBlock(text="a")], stop_reason="end_turn"),
        ModelResponse(content=[TextBlock(text="b")], stop_reason="end_turn"),
    ]
    system = [SystemBlock(text="Stable persona. " * 200, cache=True), SystemBlock(text="Today.")]

    def ask(text: str) -> ModelRequest:
        return ModelRequest(system=system, messages=[Message("user", [TextBlock(text=text)])])

    first = await provider.complete(ask("hello"))
    second = await provider.complete(ask("something else entirely"))
    assert first.usage.cache_creation_input_tokens > 0
    assert first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens > 0
    sent_system = standin.requests[0]["system"]
    assert sent_system[0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in sent_system[1]
    await provider.aclose()


async def test_missing_api_key_is_401(standin: Standin) -> None:
    async with httpx.AsyncClient(base_url=standin.base_url) as client:
        resp = await client.post(
            "/v1/messages",
            json={
                "model": "m",
                "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}],
            },
            headers={"anthropic-version": "2023-06-01"},
        )
    assert resp.status_code == 401
    assert resp.json()["type"] == "error"
    assert resp.json()["error"]["type"] == "authentication_error"
    assert standin.script.seen == []


async def test_server_error_becomes_model_error(standin: Standin) -> None:
    provider = _provider(standin)
    standin.script.responses.append(RuntimeError("responder broke"))
    req = ModelRequest(system=[], messages=[Message("user", [TextBlock(text="hi")])])
    with pytest.raises(ModelError) as info:
        await provider.complete(req)
    assert "500" in str(info.value)
    assert info.value.extra["status_code"] == 500
    assert len(standin.requests) == 1  # no SDK retries
    await provider.aclose()


async def test_connection_error_becomes_model_error() -> None:
    provider = AnthropicProvider(
        api_key="k", model="m", base_url=f"http://127.0.0.1:{free_port()}", timeout=5
    )
    req = ModelRequest(system=[], messages=[Message("user", [TextBlock(text="hi")])])
    with pytest.raises(ModelError):
        await provider.complete(req)
    await provider.aclose()


async def test_scripted_provider_order_and_exhaustion() -> None:
    one = ModelResponse(content=[TextBlock(text="one")], stop_reason="end_turn")

    def echo(request: ModelRequest) -> ModelResponse:
        return ModelResponse(content=[TextBlock(text=request.purpose)], stop_reason="end_turn")

    provider = ScriptedProvider([one, echo])
    r1 = ModelRequest(system=[], messages=[], purpose="first")
    r2 = ModelRequest(system=[], messages=[], purpose="second")
    assert (await provider.complete(r1)).text == "one"
    assert (await provider.complete(r2)).text == "second"
    with pytest.raises(ModelError):
        await provider.complete(r1)
    assert provider.requests == [r1, r2, r1]


@dataclass
class _Settings:
    use_anthropic: bool
    anthropic_api_key: SecretStr | None = None
    anthropic_model: str = "claude-test"
    anthropic_base_url: str | None = None
    offline_stream_chars_per_second: float = 0.0
    anthropic_deferred_tools: bool = False


def test_build_provider() -> None:
    with pytest.raises(ConfigError):
        build_provider(_Settings(use_anthropic=True))
    assert isinstance(
        build_provider(_Settings(use_anthropic=True, anthropic_api_key=SecretStr("k"))),
        AnthropicProvider,
    )
    assert build_provider(_Settings(use_anthropic=False)).name == "offline"
    paced = build_provider(_Settings(use_anthropic=False, offline_stream_chars_per_second=100))
    assert isinstance(paced, Paced) and paced.name == "offline"

"""The real model provider: Anthropic's Messages API through the official async SDK.

The SDK's own retries are switched off (``max_retries=0``): Temporal owns retries, and a
second retry layer would multiply attempts and hide failures from the workflow history.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, cast, get_args

import anthropic

from llm.streaming import TextSink
from llm.types import (
    Block,
    ImageBlock,
    Message,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from lomo.errors import ModelError

log = logging.getLogger(__name__)

_EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
_STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))
# Sent on every call so a stand-in server can tell a routing call from a task step; the real
# API ignores unknown headers.
PURPOSE_HEADER = "x-lomo-purpose"
# Deferred tools (`defer_loading`, loaded by `tool_reference`) belong to the API's advanced
# tool use beta (the name LangChain's Anthropic integration documents; not tried against the
# live API here). So they are sent only when a setting says the beta is known to work; by
# default a request's deferred tools go as a plain list (`plain_tools`).
DEFERRED_TOOLS_BETA = "advanced-tool-use-2025-11-20"
# Words of a 400 that refuses the beta or its tool fields (rather than the request itself).
_BETA_REFUSAL = ("beta", "defer_loading", "tool_reference", "tool search", "tool_search")


def _block_to_param(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ImageBlock):
        source = {"type": "base64", "media_type": block.media_type, "data": block.data}
        return {"type": "image", "source": source}
    content: Any = block.content
    if block.tool_refs:
        # Loading deferred tools: the API expands each reference in place, so the tools
        # array (and everything cached before this point) stays byte-identical.
        refs = [{"type": "tool_reference", "tool_name": n} for n in block.tool_refs]
        content = [{"type": "text", "text": block.content}, *refs] if block.content else refs
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": content,
        "is_error": block.is_error,
    }


def _message_to_param(message: Message) -> dict[str, Any]:
    return {"role": message.role, "content": [_block_to_param(b) for b in message.content]}


def request_to_create_kwargs(request: ModelRequest, model: str) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for one request (without headers)."""
    system: list[dict[str, Any]] = []
    for s in request.system:
        block: dict[str, Any] = {"type": "text", "text": s.text}
        if s.cache:
            block["cache_control"] = dict(_EPHEMERAL)
        system.append(block)
    tools: list[dict[str, Any]] = []
    for t in request.tools:
        tool: dict[str, Any] = {
            "name": t.name,
            "description": t.description,
            "input_schema": t.input_schema,
        }
        if t.deferred:
            tool["defer_loading"] = True
        elif t.cache:
            tool["cache_control"] = dict(_EPHEMERAL)
        tools.append(tool)
    # Without deferred tools and without a tool breakpoint, one after the tools (a request
    # with deferred tools places its breakpoints itself).
    if tools and not any(t.cache or t.deferred for t in request.tools):
        tools[-1]["cache_control"] = dict(_EPHEMERAL)
    messages = [_message_to_param(m) for m in request.messages]
    for mi, bi in request.cache_points:
        # E.g. the end of the history the next step repeats: the API reads everything up to
        # here from the cache then, and writes only what this step added.
        messages[mi]["content"][bi]["cache_control"] = dict(_EPHEMERAL)
    kwargs: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": messages,
    }
    if system:
        kwargs["system"] = system
    if tools:
        kwargs["tools"] = tools
    return kwargs


def plain_tools(request: ModelRequest) -> ModelRequest:
    """The request without the beta: the core tools and the tools a `tool_reference` has
    loaded so far, as plain tools (in the order the request lists them), and each loading
    result as text saying which tools it loaded. The model sees the same tools; only the
    tools array grows as domains load (its cache prefix then changes with it)."""
    loaded = {
        n
        for m in request.messages
        for b in m.content
        if isinstance(b, ToolResultBlock)
        for n in b.tool_refs
    }
    shown = [t for t in request.tools if not t.deferred or t.name in loaded]
    tools = [replace(t, deferred=False) for t in shown]
    messages = [Message(m.role, [_plain_block(b) for b in m.content]) for m in request.messages]
    return replace(request, tools=tools, messages=messages)


def _plain_block(block: Block) -> Block:
    if not isinstance(block, ToolResultBlock) or not block.tool_refs:
        return block
    note = f"Loaded tools: {', '.join(block.tool_refs)}."
    content = f"{block.content}\n{note}" if block.content else note
    return replace(block, content=content, tool_refs=[])


def refuses_beta(exc: anthropic.APIStatusError) -> bool:
    """A 400 about the deferred-tools beta or its fields (the live API may not know it)."""
    text = f"{exc.message} {exc.body}".lower()
    return exc.status_code == 400 and any(word in text for word in _BETA_REFUSAL)


def _stop_reason(value: str | None) -> StopReason:
    if value is None:
        return "end_turn"
    if value not in _STOP_REASONS:
        log.warning("unknown stop_reason %r from the model; treating it as end_turn", value)
        return "end_turn"
    return cast(StopReason, value)


def response_from_message(message: Any) -> ModelResponse:
    """Convert an SDK ``Message`` (or anything shaped like it) to a ModelResponse."""
    content: list[TextBlock | ToolUseBlock] = []
    for block in message.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            content.append(TextBlock(text=block.text))
        elif kind == "tool_use":
            raw_input = block.input
            content.append(
                ToolUseBlock(
                    id=block.id,
                    name=block.name,
                    input=dict(raw_input) if isinstance(raw_input, dict) else {},
                )
            )
        else:
            log.debug("ignoring content block of type %r", kind)
    u = message.usage
    usage = Usage(
        input_tokens=getattr(u, "input_tokens", None) or 0,
        output_tokens=getattr(u, "output_tokens", None) or 0,
        cache_read_input_tokens=getattr(u, "cache_read_input_tokens", None) or 0,
        cache_creation_input_tokens=getattr(u, "cache_creation_input_tokens", None) or 0,
    )
    return ModelResponse(
        content=content,
        stop_reason=_stop_reason(message.stop_reason),
        usage=usage,
        model=message.model or "",
    )


@contextmanager
def _model_errors() -> Iterator[None]:
    """The SDK's errors as ModelError, marked retryable where a second attempt can help."""
    try:
        yield
    except anthropic.APIStatusError as exc:
        raise ModelError(
            f"anthropic returned HTTP {exc.status_code}: {exc.message}",
            status_code=exc.status_code,
            retryable=exc.status_code in (408, 409, 429) or exc.status_code >= 500,
        ) from exc
    except anthropic.APIConnectionError as exc:
        raise ModelError(
            f"cannot reach anthropic: {exc.message}", status_code=None, retryable=True
        ) from exc
    except anthropic.APIError as exc:
        raise ModelError(
            f"anthropic call failed: {exc.message}", status_code=None, retryable=False
        ) from exc


class AnthropicProvider:
    """ModelProvider backed by ``anthropic.AsyncAnthropic``."""

    name = "anthropic"

    def __init__(
        self,
        api_key: str,
        model: str,
        base_url: str | None = None,
        timeout: float = 60.0,
        deferred_tools: bool = False,
    ) -> None:
        self.model = model
        # True only when the deferred-tools beta is known to work with this API; a refusal
        # turns it off for the rest of the process.
        self.deferred_tools = deferred_tools
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self._with_fallback(request, self._create)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """The same call through the SDK's streaming API: each text delta goes to
        `on_text` as it arrives; the final message is the step's response."""

        async def streamed(kwargs: dict[str, Any], headers: dict[str, str]) -> Any:
            async with self._client.messages.stream(**kwargs, extra_headers=headers) as s:
                async for text in s.text_stream:
                    await on_text(text)
                return await s.get_final_message()

        return await self._with_fallback(request, streamed)

    async def _create(self, kwargs: dict[str, Any], headers: dict[str, str]) -> Any:
        return await self._client.messages.create(**kwargs, extra_headers=headers)

    async def _with_fallback(
        self,
        request: ModelRequest,
        send: Callable[[dict[str, Any], dict[str, str]], Awaitable[Any]],
    ) -> ModelResponse:
        """One call; with deferred tools, a 400 refusing the beta is answered by the same
        call with plain tool lists, within this step (a refusal is sent before any text)."""
        deferred = self.deferred_tools and any(t.deferred for t in request.tools)
        with _model_errors():
            try:
                message = await send(*self._call(request, deferred))
            except anthropic.APIStatusError as exc:
                if not (deferred and refuses_beta(exc)):
                    raise
                log.warning("the API refused deferred tools (%s); plain tool lists", exc.message)
                self.deferred_tools = False
                message = await send(*self._call(request, False))
        return self._response(request, message)

    def _call(self, request: ModelRequest, deferred: bool) -> tuple[dict[str, Any], dict[str, str]]:
        headers = {PURPOSE_HEADER: request.purpose}
        if deferred:
            headers["anthropic-beta"] = DEFERRED_TOOLS_BETA
        else:
            request = plain_tools(request)
        return request_to_create_kwargs(request, self.model), headers

    @staticmethod
    def _response(request: ModelRequest, message: Any) -> ModelResponse:
        response = response_from_message(message)
        log.debug(
            "anthropic %s: stop=%s usage=%s", request.purpose, response.stop_reason, response.usage
        )
        return response

    async def aclose(self) -> None:
        await self._client.close()

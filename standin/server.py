"""A local stand-in for Anthropic's Messages API (the subset Lomo uses).

The real ``anthropic`` SDK can be pointed at it with ``base_url``, so the whole HTTP path
(serialization, headers, status codes, usage accounting) runs without a key. Answers come
from a pluggable responder; prompt caching is simulated the way the API reports it (in the
API's order: tools, system, messages; deferred tools only where a ``tool_reference`` loads
them; at most four breakpoints): the longest prefix up to a ``cache_control``
breakpoint, or a few blocks before one, that an earlier request wrote counts as
``cache_read_input_tokens``, the rest up to the last breakpoint as
``cache_creation_input_tokens`` (see ``account_cache``). Token counts are estimates
(``len(text) // 4``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from llm.anthropic_provider import PURPOSE_HEADER
from llm.types import (
    Block,
    ImageBlock,
    Message,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from standin.sse import paced, sse_frames

log = logging.getLogger(__name__)

Responder = Callable[[ModelRequest], Awaitable[ModelResponse]]


class BadRequest(ValueError):
    """The body is not a Messages API request this stand-in understands."""


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content=error_body(kind, message))


def estimate_tokens(text: str) -> int:
    return len(text) // 4


# --- request parsing ----------------------------------------------------------------------


def _tool_result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text", "") for b in content if isinstance(b, dict)]
        return "".join(str(t) for t in texts)
    raise BadRequest("tool_result.content must be a string or a list of blocks")


def _parse_block(b: Any) -> Block | None:
    if not isinstance(b, dict):
        raise BadRequest("content blocks must be objects")
    kind = b.get("type")
    try:
        if kind == "text":
            return TextBlock(text=str(b["text"]))
        if kind == "tool_use":
            raw = b.get("input") or {}
            if not isinstance(raw, dict):
                raise BadRequest("tool_use.input must be an object")
            return ToolUseBlock(id=str(b["id"]), name=str(b["name"]), input=raw)
        if kind == "image":
            return _parse_image(b)
        if kind == "tool_result":
            inner = b.get("content")
            refs = [
                str(c.get("tool_name"))
                for c in (inner if isinstance(inner, list) else [])
                if isinstance(c, dict) and c.get("type") == "tool_reference"
            ]
            return ToolResultBlock(
                tool_use_id=str(b["tool_use_id"]),
                content=_tool_result_text(inner),
                is_error=bool(b.get("is_error", False)),
                tool_refs=refs,
            )
    except KeyError as exc:
        raise BadRequest(f"{kind} block is missing {exc.args[0]!r}") from exc
    log.debug("stand-in ignores content block of type %r", kind)
    return None


IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def _parse_image(b: dict[str, Any]) -> ImageBlock:
    """As the API checks an image: base64 source, a supported type, bytes that decode."""
    source = b.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        raise BadRequest("image.source must be a base64 source")
    media_type, data = source.get("media_type"), source.get("data")
    if media_type not in IMAGE_TYPES:
        raise BadRequest(f"image.source.media_type must be one of {', '.join(IMAGE_TYPES)}")
    try:
        base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadRequest("image.source.data is not base64") from exc
    return ImageBlock(media_type=str(media_type), data=str(data))


def _parse_content(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(text=content)]
    if not isinstance(content, list):
        raise BadRequest("message content must be a string or a list of blocks")
    return [blk for blk in (_parse_block(b) for b in content) if blk is not None]


def _parse_system(system: Any) -> list[SystemBlock]:
    if system is None:
        return []
    if isinstance(system, str):
        return [SystemBlock(text=system)]
    if not isinstance(system, list):
        raise BadRequest("system must be a string or a list of text blocks")
    out: list[SystemBlock] = []
    for b in system:
        if not isinstance(b, dict) or b.get("type") != "text" or "text" not in b:
            raise BadRequest("system blocks must be text blocks")
        out.append(SystemBlock(text=str(b["text"]), cache=b.get("cache_control") is not None))
    return out


def model_request_from_body(body: Any, purpose: str | None = None) -> ModelRequest:
    """Convert a Messages API request body to a provider-neutral ModelRequest."""
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    messages_raw = body.get("messages")
    if not isinstance(messages_raw, list) or not messages_raw:
        raise BadRequest("messages: a non-empty list is required")
    messages: list[Message] = []
    for m in messages_raw:
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise BadRequest("each message needs role 'user' or 'assistant'")
        messages.append(Message(role=m["role"], content=_parse_content(m.get("content"))))
    tools: list[ToolSpec] = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict) or "name" not in t:
            raise BadRequest("each tool needs a name")
        tools.append(
            ToolSpec(
                name=str(t["name"]),
                description=str(t.get("description", "")),
                input_schema=dict(t.get("input_schema") or {}),
                deferred=bool(t.get("defer_loading", False)),
            )
        )
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest("max_tokens: a positive integer is required")
    return ModelRequest(
        system=_parse_system(body.get("system")),
        messages=messages,
        tools=tools,
        max_tokens=max_tokens,
        purpose=purpose or "task_step",
    )


# --- prompt-cache simulation --------------------------------------------------------------


@dataclass
class _Segment:
    text: str
    cached: bool


def _segments(body: dict[str, Any]) -> list[_Segment]:
    """The prompt as the API caches it: tools, then system, then message blocks. A tool sent
    with `defer_loading` is not part of the prompt; a `tool_reference` in a tool result is
    expanded into that tool's definition at its place in the conversation."""
    segs: list[_Segment] = []
    deferred: dict[str, str] = {}
    for t in body.get("tools") or []:
        plain = {k: v for k, v in t.items() if k not in ("cache_control", "defer_loading")}
        if t.get("defer_loading"):
            deferred[str(t.get("name"))] = json.dumps(plain, sort_keys=True)
            continue
        segs.append(_Segment(json.dumps(plain, sort_keys=True), "cache_control" in t))
    system = body.get("system")
    if isinstance(system, str):
        segs.append(_Segment(system, False))
    elif isinstance(system, list):
        for b in system:
            segs.append(_Segment(str(b.get("text", "")), b.get("cache_control") is not None))
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, str):
            segs.append(_Segment(content, False))
            continue
        for b in content or []:
            plain = {k: v for k, v in b.items() if k != "cache_control"}
            if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                plain["content"] = [
                    deferred[str(c.get("tool_name"))]
                    if isinstance(c, dict) and c.get("type") == "tool_reference"
                    else c
                    for c in b["content"]
                ]
            segs.append(
                _Segment(json.dumps(plain, sort_keys=True), b.get("cache_control") is not None)
            )
    return segs


# The API accepts at most this many cache_control blocks in one request.
MAX_BREAKPOINTS = 4


def check_cache_markup(body: dict[str, Any]) -> None:
    """What the API refuses with 400: more than four breakpoints, a breakpoint on a deferred
    tool, a tool_reference to a tool that is not sent with defer_loading."""
    tools = body.get("tools") or []
    deferred = {t.get("name") for t in tools if isinstance(t, dict) and t.get("defer_loading")}
    marks = sum(1 for t in tools if isinstance(t, dict) and "cache_control" in t)
    if any(isinstance(t, dict) and t.get("defer_loading") and "cache_control" in t for t in tools):
        raise BadRequest("a tool with defer_loading cannot have cache_control")
    system = body.get("system")
    if isinstance(system, list):
        marks += sum(1 for b in system if isinstance(b, dict) and b.get("cache_control"))
    for m in body.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        for b in content if isinstance(content, list) else []:
            if not isinstance(b, dict):
                continue
            marks += 1 if b.get("cache_control") else 0
            inner = b.get("content") if b.get("type") == "tool_result" else None
            for c in inner if isinstance(inner, list) else []:
                if isinstance(c, dict) and c.get("type") == "tool_reference":
                    if c.get("tool_name") not in deferred:
                        raise BadRequest(
                            f"tool_reference {c.get('tool_name')!r} names no deferred tool"
                        )
    if marks > MAX_BREAKPOINTS:
        raise BadRequest(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {marks}."
        )


@dataclass
class CacheUsage:
    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


# The API checks for a cached prefix at each breakpoint and at up to this many block
# boundaries before it (Anthropic's prompt-caching docs: "about 20 blocks").
LOOKBACK_BLOCKS = 20


def account_cache(
    cache: dict[str, int], body: dict[str, Any], min_cache_tokens: int = 0
) -> CacheUsage:
    """Usage as the Messages API reports it. The longest prefix ending at a breakpoint (or
    within LOOKBACK_BLOCKS blocks before one) that an earlier request wrote is read; the rest
    up to the last breakpoint is written (every breakpoint's prefix is stored); what follows
    the last breakpoint is plain input. Prefixes shorter than `min_cache_tokens` are never
    cached (the real minimum is 1024 tokens for Sonnet models)."""
    segs = _segments(body)
    marks = [i + 1 for i, seg in enumerate(segs) if seg.cached]  # boundary after each mark
    chars = [0]
    hashes = [hashlib.sha256(str(body.get("model")).encode())]
    for seg in segs:
        chars.append(chars[-1] + len(seg.text))
        h = hashes[-1].copy()
        h.update(b"\x00" + seg.text.encode())
        hashes.append(h)
    total = estimate_tokens("".join(seg.text for seg in segs))
    if not marks:
        return CacheUsage(total, 0, 0)

    def tokens(boundary: int) -> int:
        return chars[boundary] // 4

    digests = [h.hexdigest() for h in hashes]
    read = 0
    for m in marks:
        for b in range(m, max(0, m - LOOKBACK_BLOCKS) - 1, -1):
            if b > read and digests[b] in cache and tokens(b) >= min_cache_tokens:
                read = b
                break
    last = marks[-1]
    for m in marks:
        if tokens(m) >= min_cache_tokens:
            cache[digests[m]] = tokens(m)
    written = tokens(last) - tokens(read) if tokens(last) >= min_cache_tokens else 0
    return CacheUsage(total - tokens(read) - written, written, tokens(read))


# --- response -----------------------------------------------------------------------------


def message_body(response: ModelResponse, model: str, usage: CacheUsage) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for b in response.content:
        if isinstance(b, TextBlock):
            content.append({"type": "text", "text": b.text})
        else:
            content.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
    output_tokens = response.usage.output_tokens or estimate_tokens(
        json.dumps(content, sort_keys=True)
    )
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": response.model or model,
        "content": content,
        "stop_reason": response.stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
        },
    }


def beta_refusal(body: Any, request: Request) -> str | None:
    """What an API without the deferred-tools beta says to a request that uses it."""
    beta = request.headers.get("anthropic-beta", "")
    if beta:
        return f"Unexpected value(s) `{beta}` for the `anthropic-beta` header."
    tools = body.get("tools") if isinstance(body, dict) else None
    for i, t in enumerate(tools if isinstance(tools, list) else []):
        if isinstance(t, dict) and "defer_loading" in t:
            return f"tools.{i}.custom.defer_loading: Extra inputs are not permitted"
    messages = body.get("messages") if isinstance(body, dict) else None
    for m in messages if isinstance(messages, list) else []:
        content = m.get("content") if isinstance(m, dict) else None
        for b in content if isinstance(content, list) else []:
            inner = b.get("content") if isinstance(b, dict) else None
            if any(
                isinstance(c, dict) and c.get("type") == "tool_reference"
                for c in (inner if isinstance(inner, list) else [])
            ):
                return "messages: tool_reference blocks need the advanced tool use beta"
    return None


def create_standin_app(responder: Responder) -> FastAPI:
    """A FastAPI app serving POST /v1/messages from ``responder``.

    ``app.state.requests`` holds every request body received (in order) and
    ``app.state.prompt_cache`` the simulated cache (prefix hash -> token estimate);
    ``app.state.min_cache_tokens`` the shortest prefix the simulated cache keeps (0 here; a
    bench sets the real API's 1024); ``app.state.stream_delay`` the pause between streamed
    events.
    """
    app = FastAPI(title="Lomo Anthropic stand-in")
    app.state.requests = []
    app.state.betas = []  # the anthropic-beta header of each request ("" without one)
    app.state.prompt_cache = {}
    app.state.min_cache_tokens = 0
    app.state.stream_delay = 0.0  # seconds between streamed events (a slow model)
    # Fault switch: answer like an API that does not know the deferred-tools beta (400 on
    # the beta header, on `defer_loading` and on `tool_reference`).
    app.state.refuse_betas = False

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/messages", response_model=None)
    async def messages(request: Request) -> JSONResponse | StreamingResponse:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "invalid_request_error", "body is not valid JSON")
        app.state.requests.append(body)
        app.state.betas.append(request.headers.get("anthropic-beta", ""))
        if not request.headers.get("x-api-key"):
            return _error(401, "authentication_error", "x-api-key header is required")
        if app.state.refuse_betas and (refusal := beta_refusal(body, request)):
            return _error(400, "invalid_request_error", refusal)
        try:
            model_request = model_request_from_body(body, request.headers.get(PURPOSE_HEADER))
            check_cache_markup(body)
        except BadRequest as exc:
            return _error(400, "invalid_request_error", str(exc))
        model = str(body.get("model", ""))
        try:
            response = await responder(model_request)
        except Exception as exc:
            log.exception("stand-in responder failed")
            return _error(500, "api_error", f"responder failed: {type(exc).__name__}: {exc}")
        usage = account_cache(app.state.prompt_cache, body, app.state.min_cache_tokens)
        answer = message_body(response, model, usage)
        if body.get("stream"):
            frames = paced(sse_frames(answer), app.state.stream_delay)
            return StreamingResponse(frames, media_type="text/event-stream")
        return JSONResponse(content=answer)

    return app


def run(host: str, port: int) -> None:
    """Serve the stand-in with the offline model as responder."""
    import uvicorn

    from standin.model import OfflineModel

    uvicorn.run(create_standin_app(OfflineModel().complete), host=host, port=port)

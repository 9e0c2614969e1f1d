"""The Messages API's streaming answer (`"stream": true`): a finished message body told as
the server-sent events the real API sends, in its order (message_start, then per content
block start, deltas and stop, then message_delta and message_stop)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from llm.streaming import pieces


def _frame(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def _block(index: int, block: dict[str, Any]) -> Iterator[str]:
    if block["type"] == "text":
        yield _frame(
            "content_block_start", {"index": index, "content_block": {**block, "text": ""}}
        )
        for piece in pieces(block["text"]):
            delta = {"type": "text_delta", "text": piece}
            yield _frame("content_block_delta", {"index": index, "delta": delta})
    else:
        start = {**block, "input": {}}
        yield _frame("content_block_start", {"index": index, "content_block": start})
        raw = json.dumps(block["input"])
        for at in range(0, len(raw), 40):  # the API sends tool input as partial JSON too
            delta = {"type": "input_json_delta", "partial_json": raw[at : at + 40]}
            yield _frame("content_block_delta", {"index": index, "delta": delta})
    yield _frame("content_block_stop", {"index": index})


def sse_frames(body: dict[str, Any]) -> Iterator[str]:
    """`body` is the whole message as the non-streaming answer would carry it."""
    usage = body["usage"]
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield _frame("message_start", {"message": start})
    yield _frame("ping", {})
    for index, block in enumerate(body["content"]):
        yield from _block(index, block)
    stop = {"stop_reason": body["stop_reason"], "stop_sequence": None}
    yield _frame(
        "message_delta", {"delta": stop, "usage": {"output_tokens": usage["output_tokens"]}}
    )
    yield _frame("message_stop", {})

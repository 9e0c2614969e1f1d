"""The offline stand-in's segment summaries: deterministic and shorter than the step lines
it is given (one line per step: `turn T step S: person said '…'; tool → status; replied '…'`)."""

from __future__ import annotations

import re
from collections import Counter

from llm.types import ModelRequest, ModelResponse, TextBlock, Usage

_STEP = re.compile(r"^turn (\d+) step (\d+):")
_SAID = re.compile(r"person said (['\"])(.*?)\1;")
_CALL = re.compile(r"(\w+) → (\w+)(?: \(output (out_\w+)\))?;")
_REPLY = re.compile(r"replied (['\"])(.*?)\1$")
_IDS = re.compile(r"\b(?:obj|ord|crd|chk|out)_[0-9a-z]+\b")


def summarize(request: ModelRequest) -> ModelResponse:
    lines = [
        line
        for m in request.messages
        for b in m.content
        if isinstance(b, TextBlock)
        for line in b.text.splitlines()
        if line.strip()
    ]
    turns = sorted({int(m.group(1)) for line in lines if (m := _STEP.match(line))})
    said = [m.group(2)[:80] for line in lines if (m := _SAID.search(line))]
    calls: Counter[str] = Counter()
    for line in lines:
        for name, status, _ in _CALL.findall(line):
            calls[f"{name} {status}"] += 1
    replies = [m.group(2) for line in lines if (m := _REPLY.search(line))]
    ids = list(dict.fromkeys(i for line in lines for i in _IDS.findall(line)))
    parts = [f"{len(lines)} steps" + (f" in turns {turns[0]}–{turns[-1]}" if turns else "")]
    if said:
        parts.append("the person said " + " / ".join(repr(s) for s in said[:2]))
    if calls:
        parts.append("calls: " + ", ".join(f"{k} ×{n}" for k, n in sorted(calls.items())))
    if ids:
        parts.append("ids: " + ", ".join(ids[:8]))
    if replies:
        parts.append(f"last reply {replies[-1][:80]!r}")
    text = "; ".join(parts) + "."
    source = sum(len(line) for line in lines)
    if len(text) >= source:  # a summary is never longer than what it summarizes
        text = text[: max(1, source // 2)]
    return ModelResponse(
        content=[TextBlock(text=text)],
        stop_reason="end_turn",
        usage=Usage(input_tokens=source // 4, output_tokens=len(text) // 4 + 1),
        model="lomo-offline",
    )

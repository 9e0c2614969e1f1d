"""The offline stand-in's summaries, deterministic and shorter than what they summarize:
segment summaries of step lines (`turn T step S: person said '…'; tool → status; replied
'…'`) and episodic summaries of a task's memory facts."""

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


_STOP = frozenset(
    "a an the and or of to in on is are be it this that for at as with "
    "ein eine der die das und oder von zu im ist sind es dies diese für als mit".split()
)


def episode(request: ModelRequest) -> ModelResponse:
    """An episodic summary: each fact kept in its own words, without filler words."""
    text = " ".join(b.text for m in request.messages for b in m.content if isinstance(b, TextBlock))
    facts = [f.strip() for f in re.split(r"(?<=[.!?])\s+", text) if f.strip()]
    short = [" ".join(w for w in f.rstrip(".!?").split() if w.lower() not in _STOP) for f in facts]
    out = "Episode: " + "; ".join(x for x in short if x) + "."
    if len(out) >= len(text):
        out = text
    return ModelResponse(
        content=[TextBlock(text=out)],
        stop_reason="end_turn",
        usage=Usage(input_tokens=len(text) // 4, output_tokens=len(out) // 4 + 1),
        model="lomo-offline",
    )

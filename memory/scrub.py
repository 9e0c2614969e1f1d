"""Forgetting reaches what quoted the forgotten words: task goals and briefings, the
model-written segment summaries of a task's history, the layer texts stored with each step
(shown by GET /v1/tasks/{id}/context), tool results in the journal and tool outputs kept
outside the context. A sentence that contains every content word of the forget request
(or, forgetting a memory by id, of a sentence of its evidence) is removed; a segment summary
of steps that saw a forgotten message is deleted."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.context import ContextSegment, ToolOutput
from lomo.db.models import ModelStep, Task, ToolCall
from memory.models import Evidence, MemoryUsage
from memory.text import tokens

_SENTENCE = re.compile(r"((?<=[.!?])\s+|\n+)")
GONE = "[forgotten]"


def needles(texts: Iterable[str]) -> list[frozenset[str]]:
    out = []
    for text in texts:
        for part in _SENTENCE.split(text or ""):
            words = tokens(part)
            if words:
                out.append(words)
    return out


def scrub(text: str, needles: list[frozenset[str]]) -> str | None:
    """The text without its sentences that quote a needle; None if nothing quoted one."""
    if not text or not needles:
        return None
    parts = _SENTENCE.split(text)  # sentence, separator, sentence, …
    out, dropped = [], False
    for i in range(0, len(parts), 2):
        if any(n <= tokens(parts[i]) for n in needles):
            dropped = True
            continue
        out.append(parts[i] + (parts[i + 1] if i + 1 < len(parts) else ""))
    if not dropped:
        return None
    return "".join(out).strip() or GONE


def scrub_value(value: Any, needles: list[frozenset[str]]) -> tuple[Any, bool]:
    """A JSON value with every string scrubbed; whether anything changed."""
    if isinstance(value, str):
        new = scrub(value, needles)
        return (value, False) if new is None else (new, True)
    if isinstance(value, list):
        pairs = [scrub_value(v, needles) for v in value]
        return [v for v, _ in pairs], any(c for _, c in pairs)
    if isinstance(value, dict):
        items = {k: scrub_value(v, needles) for k, v in value.items()}
        return {k: v for k, (v, _) in items.items()}, any(c for _, c in items.values())
    return value, False


async def scrub_quotes(
    s: AsyncSession,
    user_id: str,
    evidence: list[Evidence],
    request: str | None,
    now: datetime,
    deleted_versions: set[str],
) -> list[str]:
    """Scrub goals, briefings, segment summaries and stored layer texts; returns the ids of
    the tasks touched (their `updated_at` moves, so the routing index re-reads them)."""
    # The words the person asked to forget; without them (forgetting a memory by id) every
    # sentence of its evidence.
    found = needles([request]) if request else needles(ev.text for ev in evidence)
    message_ids = {ev.message_id for ev in evidence if ev.message_id}
    touched: set[str] = set()
    for task in await s.scalars(select(Task).where(Task.user_id == user_id)):
        for attr in ("goal", "briefing"):
            new = scrub(getattr(task, attr) or "", found)
            if new is not None:
                setattr(task, attr, new)
                touched.add(task.id)
    for seg in await s.scalars(
        select(ContextSegment).where(
            ContextSegment.user_id == user_id, ContextSegment.status == "active"
        )
    ):
        quoted = scrub(seg.text, found) is not None
        if quoted or message_ids & set(seg.message_ids):
            seg.status, seg.text = "deleted", ""  # the context falls back to its kept steps
            touched.add(seg.task_id)
    task_ids = {ev.task_id for ev in evidence if ev.task_id} | touched
    if deleted_versions:  # contexts that showed a forgotten memory keep its words too
        task_ids |= set(
            await s.scalars(
                select(MemoryUsage.task_id).where(
                    MemoryUsage.version_id.in_(sorted(deleted_versions))
                )
            )
        )
    for step in await s.scalars(select(ModelStep).where(ModelStep.task_id.in_(sorted(task_ids)))):
        layers = [dict(layer) for layer in step.context.get("layers", [])]
        changed = False
        for layer in layers:
            new = scrub(str(layer.get("text", "")), found)
            if new is not None:
                layer["text"], changed = new, True
        if changed:
            step.context = {**step.context, "layers": layers}
    # Tool results in the journal (the context shows recent ones verbatim) and outputs kept
    # outside the context (read back with read_output).
    for call in await s.scalars(
        select(ToolCall)
        .join(Task, Task.id == ToolCall.task_id)
        .where(Task.user_id == user_id, ToolCall.result.is_not(None))
    ):
        new_result, changed = scrub_value(call.result, found)
        if changed:
            call.result = new_result
    for out in await s.scalars(select(ToolOutput).where(ToolOutput.user_id == user_id)):
        data, changed = scrub_value(json.loads(out.content), found)
        if changed:
            out.content = json.dumps(data, ensure_ascii=False)
            out.size = len(out.content)
    for task in await s.scalars(select(Task).where(Task.id.in_(sorted(touched)))):
        task.updated_at = now
    return sorted(touched)

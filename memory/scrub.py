"""Forgetting reaches what quoted the forgotten words (article §6.3, §7.3): task goals and
briefings, the model-written segment summaries of a task's history, and the layer texts
stored with each step (shown by GET /v1/tasks/{id}/context). A sentence that contains every
content word of the forget request (or, forgetting a memory by id, of a sentence of its
evidence) is removed; a segment summary of steps that saw a forgotten message is deleted."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.context import ContextSegment
from lomo.db.models import ModelStep, Task
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
    for task in await s.scalars(select(Task).where(Task.id.in_(sorted(touched)))):
        task.updated_at = now
    return sorted(touched)

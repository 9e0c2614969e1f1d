"""History segments (article §6.3): older steps are compressed segment by segment, and a new
summary is appended to the existing ones instead of rewriting the whole past.

A task's steps (in order, 0-based ordinals) fall into segments of `context_segment_steps`.
A segment closes once at least `context_recent_steps` later steps exist; from then on the
context shows its summary instead of its steps. The summary is written once, by the model,
in the `summarize_segment` activity (idempotency key `seg:{task_id}:{segment}`), which the
task runs beside the tool calls of the step that closed the segment. Until it exists (or
after forgetting deleted it) the context shows one line per step instead.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from temporalio import activity

from activities.context_rows import (
    CallLike,
    MsgLike,
    StepLike,
    body,
    load_messages,
    load_steps,
    load_window,
)
from activities.heartbeat import heartbeating
from activities.toolkit import ToolDeps
from llm.types import Message, ModelProvider, ModelRequest, ModelResponse, SystemBlock, TextBlock
from lomo.db.context import ContextSegment
from lomo.db.models import Task
from lomo.settings import Settings
from memory.context import exclusions
from workflows.types import SegmentInput

log = logging.getLogger(__name__)

SUMMARIZE_RULES = (
    "Summarize these steps of a task for your own later reference, in at most 80 words. "
    "Keep every id (objects, orders, cards, outputs), decisions and what the person asked "
    "for; drop chatter. Write only what the steps show, no guesses."
)


@dataclass
class ContextPolicy:
    segment_steps: int = 10
    recent_steps: int = 8

    @classmethod
    def of(cls, settings: Settings) -> ContextPolicy:
        return cls(settings.context_segment_steps, settings.context_recent_steps)

    def closed(self, n_steps: int) -> int:
        """How many segments are closed when the task has `n_steps` steps."""
        return max(0, (n_steps - self.recent_steps) // self.segment_steps)

    def closing(self, n_steps: int) -> int:
        """The segment that the `n_steps`-th step closed, or -1."""
        before, after = self.closed(n_steps - 1), self.closed(n_steps)
        return after - 1 if after > before else -1


def seen_in(msgs: Mapping[str, MsgLike], turn: int, step: int) -> list[MsgLike]:
    seen = [m for m in msgs.values() if (m.processed_turn, m.processed_step) == (turn, step)]
    return sorted(seen, key=lambda m: m.created_at)


def step_line(s: StepLike, msgs: Mapping[str, MsgLike], calls: Mapping[str, CallLike]) -> str:
    """One step in one line: what the person said, which calls, what the model replied."""
    resp = ModelResponse.from_dict(body(s))
    said = " ".join(m.text for m in seen_in(msgs, s.turn, s.step))
    parts = [f"turn {s.turn} step {s.step}:"]
    if said:
        parts.append(f"person said {said[:160]!r};")
    for tu in resp.tool_uses:
        call = calls.get(tu.id)
        status = call.status if call else "missing"
        handle = (call.result or {}).get("output_handle") if call else None
        parts.append(f"{tu.name} → {status}" + (f" (output {handle})" if handle else "") + ";")
    if resp.text:
        parts.append(f"replied {resp.text[:160]!r}")
    return " ".join(parts)


class SegmentActivities:
    def __init__(self, deps: ToolDeps, provider: ModelProvider) -> None:
        self.deps = deps
        self.provider = provider
        self.policy = ContextPolicy.of(deps.settings)

    @activity.defn(name="summarize_segment")
    async def summarize_segment(self, inp: SegmentInput) -> None:
        key = f"seg:{inp.task_id}:{inp.segment}"
        size = self.policy.segment_steps
        first, last = inp.segment * size, (inp.segment + 1) * size - 1
        async with self.deps.db.session() as s:
            if await s.get(ContextSegment, key) is not None:
                return  # written once; a retry or a replayed step changes nothing
            task = await s.get(Task, inp.task_id)
            if task is None:
                return
            user_id = task.user_id
            excl = await exclusions(s, user_id)
            # Plain rows without the steps' stored contexts (each holds the whole text it
            # was sent); bodies only for the segment's own steps.
            steps = (await load_steps(s, inp.task_id))[first : last + 1]
            msgs = await load_messages(s, inp.task_id, excl.message_ids)
            calls = {c.tool_use_id: c for c in await load_window(s, inp.task_id, steps)}
            kept = [st for st in steps if (inp.task_id, st.turn, st.step) not in excl.step_keys]
            lines = [step_line(st, msgs, calls) for st in kept]
            seen = sorted({m.id for st in kept for m in seen_in(msgs, st.turn, st.step)})
        if len(steps) < size:
            return  # not closed yet (never asked for by the workflow)
        request = ModelRequest(
            system=[SystemBlock(text=SUMMARIZE_RULES)],
            messages=[Message(role="user", content=[TextBlock(text="\n".join(lines) or "-")])],
            max_tokens=400,
            purpose="summarize",
        )
        async with heartbeating():
            resp = await self.provider.complete(request)
        async with self.deps.db.session() as s:
            if await s.get(ContextSegment, key) is not None:
                return
            s.add(
                ContextSegment(
                    id=key,
                    user_id=user_id,
                    task_id=inp.task_id,
                    segment=inp.segment,
                    first_step=first,
                    last_step=last,
                    text=resp.text.strip(),
                    message_ids=seen,
                    status="active",
                )
            )

    def all(self) -> list[Any]:
        return [self.summarize_segment]

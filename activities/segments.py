"""History segments: older steps are compressed segment by segment, and a new
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
from typing import Any

from temporalio import activity

from activities.types import SegmentInput
from context.segments import SUMMARIZE_RULES, ContextPolicy, seen_in, step_line
from journal.store import StepStore
from llm.types import Message, ModelProvider, ModelRequest, SystemBlock, TextBlock
from lomo.db.context import ContextSegment
from lomo.db.models import Task
from lomo.heartbeat import heartbeating
from tools.base import ToolDeps

log = logging.getLogger(__name__)


class SegmentActivities:
    def __init__(self, deps: ToolDeps, provider: ModelProvider) -> None:
        self.deps = deps
        self.provider = provider
        self.policy = ContextPolicy.of(deps.settings)
        self.store = StepStore(deps.db, self.policy)

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
        seg = await self.store.load_segment(inp.task_id, user_id, first, last)
        if len(seg.steps) < size:
            return  # not closed yet (never asked for by the workflow)
        lines = [step_line(st, seg.messages, seg.calls) for st in seg.kept]
        seen = sorted({m.id for st in seg.kept for m in seen_in(seg.messages, st.turn, st.step)})
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

"""History segments (docs/architecture.md#context): which steps a context shows in full and
which a segment summary stands for, and how one step reads as a line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from context.types import CallRow, MsgRow, StepRow, body
from llm.types import ModelResponse
from lomo.settings import Settings

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

    def valid(self, rows: list[tuple[int, int, int, str]]) -> dict[int, str]:
        """The summaries (segment, first, last, text) written for this segment size: one
        written under another size covers other steps (its segment shows lines instead)."""
        size = self.segment_steps
        return {
            segment: text
            for segment, first, last, text in rows
            if (first, last) == (segment * size, (segment + 1) * size - 1)
        }

    def in_full(
        self, steps: list[StepRow], summaries: dict[int, str], excluded: set[tuple[int, int]]
    ) -> list[StepRow]:
        """The steps a context needs whole: the open segments, the segment that closed last
        (its domains are carried over the boundary), and every closed segment whose summary
        is missing or touched by forgetting (it shows one line per kept step)."""
        size, n = self.segment_steps, len(steps)
        closed = self.closed(n)
        need = set(range(max(0, closed * size - size), n))
        for k in range(closed):
            seg = steps[k * size : (k + 1) * size]
            touched = any((s.turn, s.step) in excluded for s in seg)
            if summaries.get(k) is None or touched:
                need.update(range(k * size, min((k + 1) * size, n)))
        return [steps[i] for i in sorted(need)]


def seen_in(msgs: Mapping[str, MsgRow], turn: int, step: int) -> list[MsgRow]:
    seen = [m for m in msgs.values() if (m.processed_turn, m.processed_step) == (turn, step)]
    return sorted(seen, key=lambda m: m.created_at)


def step_line(s: StepRow, msgs: Mapping[str, MsgRow], calls: Mapping[str, CallRow]) -> str:
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

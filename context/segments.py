"""History segments (article §6.3): which steps a context shows in full and which a segment
summary stands for, and how one step reads as a line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from journal.rows import (
    CallLike,
    MsgLike,
    StepLike,
    body,
)
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

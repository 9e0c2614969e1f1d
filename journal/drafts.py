"""A step's reply as it is being written: `reply.delta` events in the person's event log.

Deltas never enter workflow history. Each carries the step and the activity attempt, and
the offset of its text in that attempt's reply, so a reader can tell a retried attempt
(its partial text replaces the earlier one) from a continuation, and a repeated delta
from a new one. The finished text arrives once more, whole, as the step's `task.reply`
event, which supersedes every draft of that step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lomo.db.engine import Database
from lomo.events import append_event
from lomo.states import EventType

DELTA_EVENT = EventType.REPLY_DELTA


@dataclass
class DraftKey:
    user_id: str
    task_id: str
    turn: int
    step: int
    attempt: int


@dataclass
class ReplyDraft:
    """Collects streamed text and writes it at most every `flush_seconds` (one small
    transaction each), so a fast stream costs a few writes, not one per token. The first
    piece is written at once: the person sees the reply begin as soon as the model does."""

    db: Database
    key: DraftKey
    flush_seconds: float
    sent: int = 0  # characters written so far
    pending: list[str] = field(default_factory=list)
    last_flush: float = float("-inf")

    async def add(self, text: str) -> None:
        self.pending.append(text)
        if time.monotonic() - self.last_flush >= self.flush_seconds:
            await self.flush()

    async def flush(self) -> None:
        text = "".join(self.pending)
        self.last_flush = time.monotonic()
        if not text:
            return
        k = self.key
        data = {
            "task_id": k.task_id,
            "turn": k.turn,
            "step": k.step,
            "attempt": k.attempt,
            "offset": self.sent,
            "text": text,
        }
        async with self.db.session() as s:
            await append_event(s, k.user_id, DELTA_EVENT, data)
        self.pending.clear()
        self.sent += len(text)


def shown_text(deltas: list[dict[str, object]]) -> str:
    """What a reader shows of one step's deltas, in log order: the latest attempt's text
    (a retry's text replaces the partial text before it), each offset taken once."""
    text, attempt = "", 0
    for d in deltas:
        a, offset, piece = int(str(d["attempt"])), int(str(d["offset"])), str(d["text"])
        if a > attempt:
            text, attempt = "", a
        if a == attempt and offset == len(text):
            text += piece
    return text

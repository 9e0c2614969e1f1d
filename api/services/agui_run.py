"""One AG-UI run, told from the person's event log: a pure translator.

The run follows one message of the person (or one card answer) until the turn it started
ends. It reads the same durable log as `GET /v1/events` (`reply.delta`, `task.reply`,
`task.status`, `card.*`, `generation.*`) plus the task's journaled tool calls, so a
client that drops the stream loses nothing: the run goes on in Temporal, and the same
input posted again is told again from the log.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.types import AssistantMessage

from lomo.states import CardKind, EventType, TaskStatus

# A task in one of these is still working on the run's turn.
BUSY = frozenset({TaskStatus.RUNNING, TaskStatus.WAITING_GENERATION, "stopping"})
GENERATION_EVENTS = frozenset({EventType.GENERATION_PROGRESS, EventType.GENERATION_COMPLETED})
# Cards that end a run with an interrupt: the person's answer resumes it.
INTERRUPTING = frozenset(
    {
        CardKind.PRICE,
        CardKind.SELECT,
        CardKind.CONFIRM,
        CardKind.CLARIFY,
        CardKind.DELETE,
        CardKind.FORGET,
    }
)


@dataclass
class ToolCallRow:
    call_id: str
    tool_use_id: str
    name: str
    input: dict[str, Any]
    status: str
    result: dict[str, Any] | None


@dataclass
class AgUiRun:
    thread_id: str
    run_id: str
    message_id: str | None  # the person's message this run follows (None for a resume)
    task_id: str | None = None
    texts: dict[str, str] = field(default_factory=dict)  # AG-UI message id -> text sent
    drafts: dict[str, str] = field(default_factory=dict)  # the current attempt's text
    attempts: dict[str, int] = field(default_factory=dict)
    diverged: set[str] = field(default_factory=set)
    closed: set[str] = field(default_factory=set)
    calls: dict[str, str] = field(default_factory=dict)  # tool_use_id -> what was sent
    state: dict[str, Any] = field(default_factory=dict)
    worked: bool = False  # the task was seen working on this run's turn
    finished: bool = False

    def on_event(self, type_: str, data: dict[str, Any]) -> list[BaseEvent]:
        """The AG-UI events one log event means for this run (often none)."""
        if type_ == EventType.MESSAGE_ROUTED and data.get("message_id") == self.message_id:
            self.task_id = data.get("task_id") or None
            return []
        if type_ == EventType.REPLY_DELTA and self._ours(data):
            return self._delta(data)
        if type_ == EventType.TASK_REPLY:
            return self._reply(data)
        if type_ == EventType.TASK_STATUS and self._ours(data):
            self.worked = True  # the task took up the run's turn
            return []
        if type_ in GENERATION_EVENTS and self._ours(data):
            return [CustomEvent(name="lomo.generation", value={"type": type_, **data})]
        if type_ == EventType.CARD_CREATED and self.task_id is None and self._asks_about_ours(data):
            return [self._finish([data])]  # the main thread asks where the message belongs
        return []

    def _asks_about_ours(self, card: dict[str, Any]) -> bool:
        payload = card.get("payload") or {}
        return card.get("kind") == CardKind.CLARIFY and payload.get("message_id") == self.message_id

    def _ours(self, data: dict[str, Any]) -> bool:
        return self.task_id is not None and data.get("task_id") == self.task_id

    def _delta(self, d: dict[str, Any]) -> list[BaseEvent]:
        mid = f"{d['task_id']}:{d['turn']}:{d['step']}"
        self.worked = True
        if mid in self.closed or mid in self.diverged:
            return []
        out: list[BaseEvent] = []
        if mid not in self.texts:
            self.texts[mid], self.attempts[mid] = "", int(d["attempt"])
            out.append(TextMessageStartEvent(message_id=mid, role="assistant"))
        attempt, sent = int(d["attempt"]), self.texts[mid]
        if attempt > self.attempts[mid]:
            # A retried attempt: its text replaces the partial one. What was sent cannot be
            # taken back, so the run continues where the new text agrees with it, and
            # corrects the message with a snapshot at its end where it does not.
            self.attempts[mid], self.drafts[mid] = attempt, ""
        draft = self.drafts.get(mid, "")
        if attempt != self.attempts[mid] or int(d["offset"]) != len(draft):
            return out  # an older attempt's piece, or one already taken
        self.drafts[mid] = draft = draft + str(d["text"])
        if draft.startswith(sent):
            piece = draft[len(sent) :]
            if piece:
                self.texts[mid] = draft
                out.append(TextMessageContentEvent(message_id=mid, delta=piece))
        elif not sent.startswith(draft):
            self.diverged.add(mid)
        return out

    def _reply(self, d: dict[str, Any]) -> list[BaseEvent]:
        main_answer = self.message_id is not None and d.get("message_id") == self.message_id
        if not (main_answer or self._ours(d)):
            return []
        self.worked = True
        text = str(d.get("text", ""))
        mid = f"{self.run_id}:answer" if main_answer else f"{d['task_id']}:{d['turn']}:{d['step']}"
        out: list[BaseEvent] = []
        if mid not in self.texts:
            self.texts[mid] = ""
            out.append(TextMessageStartEvent(message_id=mid, role="assistant"))
        sent = self.texts[mid]
        if mid not in self.diverged and text.startswith(sent) and text != sent:
            out.append(TextMessageContentEvent(message_id=mid, delta=text[len(sent) :]))
        out.append(TextMessageEndEvent(message_id=mid))
        self.closed.add(mid)
        if mid in self.diverged:
            message = AssistantMessage(id=mid, role="assistant", content=text)
            out.append(MessagesSnapshotEvent(messages=[message]))
        self.texts[mid] = text
        if main_answer:
            out.append(self._finish(None))
        return out

    def on_tool_calls(self, rows: list[ToolCallRow], final: Collection[str]) -> list[BaseEvent]:
        """TOOL_CALL_* for the task's journaled calls: start, args and end once planned,
        the result once final."""
        out: list[BaseEvent] = []
        for r in rows:
            seen = self.calls.get(r.tool_use_id)
            if seen is None:
                # The step's text message, when the step said something before its call.
                parent = ":".join(r.call_id.split(":")[:3])
                out += [
                    ToolCallStartEvent(
                        tool_call_id=r.tool_use_id,
                        tool_call_name=r.name,
                        parent_message_id=parent if parent in self.texts else None,
                    ),
                    ToolCallArgsEvent(tool_call_id=r.tool_use_id, delta=_json(r.input)),
                    ToolCallEndEvent(tool_call_id=r.tool_use_id),
                ]
                self.calls[r.tool_use_id] = seen = "open"
            if seen == "open" and r.status in final and r.result is not None:
                out.append(
                    ToolCallResultEvent(
                        message_id=f"{r.call_id}:result",
                        tool_call_id=r.tool_use_id,
                        content=_json(r.result),
                        role="tool",
                    )
                )
                self.calls[r.tool_use_id] = "done"
        return out

    def on_state(self, state: dict[str, Any]) -> list[BaseEvent]:
        """A snapshot the first time, then the top-level keys that changed as a JSON Patch."""
        if state == self.state:
            return []
        if state.get("status") in BUSY:
            self.worked = True
        if not self.state:
            self.state = state
            return [StateSnapshotEvent(snapshot=state)]
        ops = [
            {"op": "replace" if k in self.state else "add", "path": f"/{k}", "value": v}
            for k, v in state.items()
            if self.state.get(k) != v
        ]
        self.state = state
        return [StateDeltaEvent.model_validate({"type": "STATE_DELTA", "delta": ops})]

    def ending(self) -> BaseEvent | None:
        """RUN_FINISHED or RUN_ERROR once the run's turn is over, else None."""
        if self.finished or not self.state or not self.worked:
            return None
        status = self.state.get("status")
        if status in BUSY:
            return None
        if status == TaskStatus.FAILED:
            self.finished = True
            return RunErrorEvent(message=self.state.get("status_reason") or "the task failed")
        cards = [c for c in self.state.get("cards", []) if c["kind"] in INTERRUPTING]
        if cards:  # a call waiting on the person's answer stays open across the interrupt
            return self._finish(cards)
        if any(v == "open" for v in self.calls.values()):
            return None
        return self._finish(None)

    def _finish(self, cards: list[dict[str, Any]] | None) -> BaseEvent:
        self.finished = True
        if cards:
            interrupts = [
                Interrupt(id=c["card_id"], reason=c["kind"], message=c["title"]) for c in cards
            ]
            outcome: Any = RunFinishedInterruptOutcome(interrupts=interrupts)
        else:
            outcome = RunFinishedSuccessOutcome()
        return RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)

    def open_messages(self) -> list[str]:
        return [m for m in self.texts if m not in self.closed]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)

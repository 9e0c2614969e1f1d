"""The values the step's storage takes and gives (`journal/store.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from context.types import StepData


@dataclass(frozen=True, slots=True)
class StepQuery:
    """Which step to load: its task, person, place in the task and new messages."""

    task_id: str
    user_id: str
    turn: int
    step: int
    message_ids: list[str]


@dataclass(slots=True)
class StepLoad:
    """A step's load. `stored`: the decision this step already stored (its response and how
    many steps the task had with it); the context is not loaded then."""

    data: StepData
    stored: tuple[dict[str, Any], int] | None = None
    unbound_memory: bool = False  # a task memory waits to be bound to this task


@dataclass(frozen=True, slots=True)
class StatusChange:
    """A task's status as the workflow decided it. `only_before_turn` / `only_at_turn`
    guard it by the task's stored turn (0: unguarded); `kind` is written with it."""

    task_id: str
    status: str
    reason: str = ""
    kind: str = ""
    only_before_turn: int = 0
    only_at_turn: int = 0
    # The writer's fencing token (its workflow time in µs; 0: unfenced): an older one than
    # the stored token is refused, so a resumed stale writer cannot undo a newer status.
    fence: int = 0
    # A `task.reply` written with the change, only if the change applies (a presented
    # result: one reply, whatever retries or stale attempts write the status again).
    reply: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class PlannedCallRow:
    call_id: str
    tool_use_id: str
    name: str
    input: dict[str, Any]


@dataclass(slots=True)
class StepRecord:
    """What a step commits: its decision with the context it was made on, the calls it
    planned, the messages it processed, its reply's event, the memory versions it drew on,
    and (`running`) the turn's status when the workflow asked for it with the step."""

    task_id: str
    user_id: str
    turn: int
    step: int
    at: datetime
    context: dict[str, Any]
    response: dict[str, Any]
    reported_orders: list[str] = field(default_factory=list)
    message_ids: list[str] = field(default_factory=list)
    calls: list[PlannedCallRow] = field(default_factory=list)
    reply: str = ""
    memory_versions: list[str] = field(default_factory=list)
    running: StatusChange | None = None
    running_at: datetime | None = None
    turn_facts: bool = False  # read the turn's facts in the same transaction


@dataclass(slots=True)
class TurnFacts:
    """The checklist and cards as the workflow's stop-check reads them."""

    checklist_total: int = 0
    checklist_open: int = 0
    blocked: str = ""
    progress: bool = False
    open_cards: list[str] = field(default_factory=list)
    checkpoint_due: str = ""


@dataclass(slots=True)
class CallRecord:
    """A planned call as its journal holds it; `seen_domains` are the domains the step that
    planned it could see (None when that step recorded none)."""

    status: str
    result: dict[str, Any] | None
    name: str
    input: dict[str, Any]
    user_id: str
    seen_domains: list[str] | None = None


@dataclass(slots=True)
class CallResult:
    """A call's result to store; `output` is the visible text kept outside the context when
    it is too long for it (with its handle `output_id`)."""

    task_id: str
    user_id: str
    call_id: str
    status: str
    record: dict[str, Any]
    at: datetime
    output: str = ""
    output_id: str = ""
    turn_facts_for: int = 0  # the turn whose facts to read with it (0: none)

"""One dataclass per workflow/activity input and output. Only ids and small values travel
through workflow history; contexts, responses and tool outputs stay in the SQL DB."""

from __future__ import annotations

from dataclasses import dataclass, field

TERMINAL_TASK_STATUSES = ("stopped", "completed", "failed", "archived")


@dataclass
class TaskInput:
    task_id: str
    user_id: str
    kind: str  # "lightweight" | "persistent"
    first_message_id: str | None = None
    # Carried across continue_as_new (compact state only).
    turn: int = 0
    pending_message_ids: list[str] = field(default_factory=list)
    status: str = "running"
    # Limits come from settings through the input: workflow code reads no environment.
    max_steps_per_turn: int = 8
    generation_wait_seconds: float = 60.0


@dataclass
class MainThreadInput:
    user_id: str
    pending_message_ids: list[str] = field(default_factory=list)


@dataclass
class RouteInput:
    user_id: str
    message_id: str


@dataclass
class RouteDecision:
    decision: str  # answer | lightweight | existing | new | clarify
    task_id: str | None = None
    kind: str | None = None
    max_steps_per_turn: int = 8
    generation_wait_seconds: float = 60.0


@dataclass
class StepInput:
    task_id: str
    turn: int
    step: int
    message_ids: list[str]


@dataclass
class PlannedCall:
    index: int
    name: str


@dataclass
class StepDecision:
    calls: list[PlannedCall]
    end_turn: bool


@dataclass
class ToolInput:
    task_id: str
    call_id: str


@dataclass
class ToolOutcome:
    status: str  # done | error | outcome_unknown | needs_confirmation
    order_id: str | None = None  # set when the tool started a generation job we must await
    made_progress: bool = False
    card_id: str | None = None  # set when the tool needs the person's answer first


@dataclass
class OrderRef:
    order_id: str


@dataclass
class OrderState:
    order_id: str
    status: str  # created | submitted | queued | running | succeeded | failed

    @property
    def terminal(self) -> bool:
        return self.status in ("succeeded", "failed")


@dataclass
class StatusInput:
    task_id: str
    status: str
    reason: str = ""


@dataclass
class GenerationEvent:
    order_id: str
    status: str

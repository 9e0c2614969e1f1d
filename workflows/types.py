"""The workflows' own inputs: what starts a workflow (TaskInput, MainThreadInput), what it
carries across continue-as-new, and the payloads of signals and updates between the api
and the workflows. The activities' inputs and outputs are in activities/types.py and
activities/flow_types.py. Only ids and small values travel through workflow history."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class InboxEntry:
    message_id: str
    received_at: str  # ISO time the workflow accepted it (workflow.now())


@dataclass
class TaskInput:
    task_id: str
    user_id: str
    kind: str  # "lightweight" | "persistent"
    first_message_id: str | None = None
    # Limits come from settings through the input: workflow code reads no environment.
    max_steps_per_turn: int = 8
    generation_wait_seconds: float = 60.0  # wait for a callback before polling upstream
    max_turns_without_progress: int = 2
    card_wait_seconds: float = 300.0  # wait for a card answer before re-reading the DB
    heartbeat_timeout_seconds: float = 30.0  # a dead worker's model/tool call is retried
    # Compact state carried across continue_as_new; never raw history.
    turn: int = 0
    status: str = "running"
    inbox: list[InboxEntry] = field(default_factory=list)
    waiting_orders: list[str] = field(default_factory=list)
    open_cards: dict[str, str] = field(default_factory=dict)  # card_id -> call_id or ""
    answered_cards: list[str] = field(default_factory=list)
    idle_turns: int = 0
    stop_reason: str = ""
    # Ids the task already read (bounded, see CONSUMED_KEPT).
    consumed_messages: list[str] = field(default_factory=list)
    # How long a turn runs before the search attribute shows it `running` (workflows/task.py).
    running_visible_seconds: float = 2.0
    # Waiting orders whose result is the answer (planned `present_when_done`).
    present_orders: list[str] = field(default_factory=list)


@dataclass
class MainThreadInput:
    user_id: str
    pending_message_ids: list[str] = field(default_factory=list)


@dataclass
class GenerationEvent:
    order_id: str
    status: str


@dataclass
class ResumeInput:
    max_steps_per_turn: int | None = None
    max_turns_without_progress: int | None = None


@dataclass
class FlowEvent:
    """To the owning task: the run ended or needs the person (it wakes the task)."""

    run_id: str
    status: str

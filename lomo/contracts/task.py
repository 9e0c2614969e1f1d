"""TaskWorkflow's contract (workflows/task.py): one workflow per task, id `task:{task_id}`.

Updates come from the api (validated; a refusal is an `ApplicationError` whose message
the api returns as a 409). Signals come from other workflows and from the api's relay.
Only ids and small values travel through workflow history.
"""

from __future__ import annotations

from dataclasses import dataclass, field

WORKFLOW = "TaskWorkflow"

# Updates: each answers the task's status, or what it is now doing.
MESSAGE = "message"  # a message id for the task's inbox
CARD_ANSWERED = "card_answered"  # a card id the person answered
STOP = "stop"
PAUSE = "pause"
RESUME = "resume"  # ResumeInput
ARCHIVE = "archive"

# Signals.
DELIVER = "deliver"  # a message id routed by the main thread
TAKEN_BACK = "taken_back"  # a message id withdrawn or moved away before it was read
PROMOTE = "promote"  # lightweight becomes persistent, in place
GENERATION_EVENT = "generation_event"  # GenerationEvent
FLOW_EVENT = "flow_event"  # FlowEvent

# Query: TaskView.
STATE = "state"


def workflow_id(task_id: str) -> str:
    return f"task:{task_id}"


@dataclass
class InboxEntry:
    message_id: str
    received_at: str  # ISO time the workflow accepted it (workflow.now())


@dataclass
class TaskInput:
    task_id: str
    user_id: str
    kind: str  # lomo.states.TaskKind
    first_message_id: str | None = None
    # Limits come from settings through the input: workflow code reads no environment.
    max_steps_per_turn: int = 8
    generation_wait_seconds: float = 60.0  # wait for a callback before polling upstream
    max_turns_without_progress: int = 2
    card_wait_seconds: float = 300.0  # wait for a card answer before re-reading the DB
    heartbeat_timeout_seconds: float = 30.0  # a dead worker's model/tool call is retried
    # The waits above double per wait, up to these caps: a stuck job or an open card adds
    # few events to the history.
    generation_wait_max_seconds: float = 600.0
    card_wait_max_seconds: float = 3600.0
    # Compact state carried across continue_as_new; never raw history.
    turn: int = 0
    status: str = "running"  # lomo.states.TaskStatus
    inbox: list[InboxEntry] = field(default_factory=list)
    waiting_orders: list[str] = field(default_factory=list)
    open_cards: dict[str, str] = field(default_factory=dict)  # card_id -> call_id or ""
    answered_cards: list[str] = field(default_factory=list)
    idle_turns: int = 0
    stop_reason: str = ""
    # Ids the task already read (bounded, see workflows/task_state.py CONSUMED_KEPT).
    consumed_messages: list[str] = field(default_factory=list)
    # How long a turn runs before the search attribute shows it `running`.
    running_visible_seconds: float = 2.0
    # Waiting orders whose result is the answer (planned `present_when_done`).
    present_orders: list[str] = field(default_factory=list)


@dataclass
class ResumeInput:
    max_steps_per_turn: int | None = None
    max_turns_without_progress: int | None = None


@dataclass
class GenerationEvent:
    """A generation job's new status, to the task or flow run that waits on it."""

    order_id: str
    status: str  # lomo.states.OrderStatus


@dataclass
class FlowEvent:
    """To the owning task: the run ended or needs the person (it wakes the task)."""

    run_id: str
    status: str


@dataclass
class TaskView:
    """The `state` query's answer: the task's compact state as the workflow holds it."""

    status: str
    kind: str
    turn: int
    inbox: list[str]  # message ids not read yet
    waiting_orders: list[str]  # orders whose job has not ended
    open_cards: list[str]
    stop_reason: str

"""The task activities' inputs and outputs: what `TaskWorkflow` sends its activities and
what they answer (activities/runtime.py, segments.py, generation.py). One dataclass per
input and per output; only ids and small values, so they travel through workflow history
while contexts, responses and tool outputs stay in the SQL DB."""

from __future__ import annotations

from dataclasses import dataclass, field

from lomo.states import TERMINAL_ORDER


@dataclass
class StatusInput:
    """A task's status as the workflow decided it: `set_task_status`'s input, and the
    turn's `running` that the turn's first model step writes."""

    task_id: str
    status: str
    reason: str = ""
    kind: str = ""  # set on promotion
    # Guards on the task's stored turn (written with each stored step): a retried step that
    # already stored its decision does not write its turn's "running" again.
    only_before_turn: int = 0
    only_at_turn: int = 0
    # The workflow time it was decided at (µs): the write's fencing token (journal/types.py).
    fence: int = 0
    # Orders whose results the runtime presents with this status, in its transaction: the
    # reply is written only when the status changes, so a retried or late write adds none.
    present: list[str] = field(default_factory=list)
    # Orders a stop cancelled upstream: the reply written with this status says what each
    # cost (activities/present.py), once, like a presented result.
    cancelled: list[str] = field(default_factory=list)
    # Why they were cancelled when it was not a stop: "moved" or "changed"
    # (journal/supersede.py); the reply says so first.
    cancel_cause: str = ""


@dataclass
class TurnStateInput:
    task_id: str
    turn: int


@dataclass
class TurnState:
    """The checklist's compact summary the stop-check needs (read from the DB)."""

    checklist_total: int = 0
    checklist_open: int = 0
    blocked: str = ""
    checkpoint_due: str = ""  # id of the step that needs the person's confirmation
    progress: bool = False  # a step became done during this turn
    open_cards: list[str] = field(default_factory=list)  # the task's open cards in the DB


@dataclass
class StepInput:
    task_id: str
    turn: int
    step: int
    message_ids: list[str]
    user_id: str  # the task's person: the step's storage refuses another's task
    # The turn's "running" status, which the turn's first step writes (while the model
    # thinks, or with its decision): no separate status activity per turn.
    status: StatusInput | None = None


@dataclass
class PlannedCall:
    index: int
    name: str


@dataclass
class StepDecision:
    calls: list[PlannedCall]
    end_turn: bool
    asked_person: bool = False  # ended with a question to the person and no tool call
    segment_closed: int = -1  # this step closed that history segment: summarize it
    # Set when the step ends the turn without a call: the state the stop-check needs, read
    # in the step's transaction, so the turn's end costs no separate `turn_state` activity.
    turn_state: TurnState | None = None


@dataclass
class ToolInput:
    task_id: str
    call_id: str
    # The turn this call ends: the outcome then carries that turn's state (0: not asked).
    turn_state_for: int = 0
    # The planned call's tool: an idempotent one is neither locked nor marked `started`
    # before it runs ("": a rerun of a confirmed call, which is).
    name: str = ""


@dataclass
class ToolOutcome:
    status: str  # done | error | outcome_unknown | needs_confirmation
    order_id: str | None = None  # set when the tool started a generation job we must await
    made_progress: bool = False
    card_id: str | None = None  # set when the tool needs the person's answer first
    flow_run: str | None = None  # a flow run the task starts (child workflow, abandoned)
    turn_state: TurnState | None = None  # read after the call when `turn_state_for` asked
    # The call was planned `present_when_done` and placed its order: the job's result is
    # the answer, so its end wakes no model unless a decision is needed.
    present: bool = False


@dataclass
class SegmentInput:
    task_id: str
    segment: int


@dataclass
class CheckpointInput:
    task_id: str
    item_id: str


@dataclass
class CardRef:
    card_id: str


@dataclass
class CardState:
    card_id: str
    status: str  # open | answered | expired
    action: str = ""


@dataclass
class OrderRef:
    order_id: str


@dataclass
class ReviewInput:
    task_id: str
    order_ids: list[str]


@dataclass
class SupersedeInput:
    """Messages that reached a task while it waited on its jobs."""

    task_id: str
    user_id: str
    message_ids: list[str]


@dataclass
class SupersedeOutcome:
    """The running orders those messages made unwanted, and why ("moved", "changed")."""

    order_ids: list[str] = field(default_factory=list)
    cause: str = ""


@dataclass
class ReviewOutcome:
    """What a turn's results miss of their briefs, in words, per order (empty: all met)."""

    misses: dict[str, list[str]]


@dataclass
class OrderState:
    order_id: str
    status: str  # created | submitted | queued | running | succeeded | failed | cancelled
    object_id: str | None = None  # the asset a collected result became

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_ORDER

"""TaskWorkflow's compact state, and the pure functions over it (see workflows/task.py).

Only ids, counters and statuses live here; contexts, responses and tool outputs stay in
the DB. Nothing here calls Temporal: the workflow passes in what it needs (the time a
message arrived), so each function can be read, and tested, on its own. `restore` builds
the state from a run's input, `carry` is what `continue_as_new` takes along.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from activities.types import TurnState
from lomo.contracts.task import InboxEntry, TaskInput, TaskView
from lomo.states import TERMINAL_ORDER, OrderStatus, TaskKind, TaskStatus
from lomo.words import say
from workflows.stopcheck import TurnSnapshot

# How many consumed message ids a task remembers (and carries across continue-as-new). A
# consumed id comes back only from a hand-off that read the message as not yet arrived just
# before the task read it (the relay's round, a client's retry, the api's fallback through
# the main thread): seconds, in which a task reads a few messages, not hundreds. 256 ids
# are about 7 KB of carried input.
CONSUMED_KEPT = 256
# Statuses in which the task's own workflow has ended, or the person's decision closed it.
CLOSED_STATUSES = frozenset({TaskStatus.STOPPED, TaskStatus.ARCHIVED, TaskStatus.FAILED})
STOPPING = "stopping"


@dataclass
class TaskRunState:
    """Everything one run of a task's workflow holds between its workflow tasks."""

    inp: TaskInput  # ids and limits; `resume` may raise the limits in place
    kind: TaskKind
    status: TaskStatus
    turn: int = 0
    stop_reason: str = ""
    shown: str = ""  # the status the search attribute last got
    inbox: list[InboxEntry] = field(default_factory=list)
    consumed: list[str] = field(default_factory=list)  # the latest CONSUMED_KEPT ids read
    waiting: dict[str, str] = field(default_factory=dict)  # order_id -> last known status
    collected: set[str] = field(default_factory=set)
    # Terminal job signals that arrived before the call that placed the order returned
    # (a fast job): order_id -> status, taken over when the call's outcome names the order.
    # Not carried across continue-as-new: a lost one only costs a poll.
    early_ends: dict[str, str] = field(default_factory=dict)
    # Orders whose call was planned `present_when_done` (their result is the answer),
    # until their job ends; and the ones the next status write presents.
    present_orders: set[str] = field(default_factory=set)
    presenting: list[str] = field(default_factory=list)
    open_cards: dict[str, str] = field(default_factory=dict)  # card_id -> call_id, or ""
    # Open cards of calls short of balance: the task says it waits for credit. Not carried
    # across continue-as-new (a task parked on cards does not roll over).
    credit_cards: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)
    idle_turns: int = 0
    card_waits: int = 0  # card re-reads that found nothing since the last wake-up (back-off)
    wake: bool = False  # the next turn runs without new input (a job, a flow, a card)
    stop_requested: bool = False
    archive_requested: bool = False
    pause_requested: bool = False
    resume_requested: bool = False
    # The current turn, for the stop-check: whether the model ran it, whether it made
    # progress, asked the person, used up its steps, and the turn's state as read by the
    # activity that ended it.
    model_turn: bool = False
    progress: bool = False
    asked: bool = False
    exhausted: bool = False
    end_state: TurnState | None = None
    # While the task waits on jobs (not carried: no continue-as-new happens then): the
    # inbox ids already checked for taking the request away from the jobs, the orders
    # cancelled for that, and why ("moved", "changed").
    checked: set[str] = field(default_factory=set)
    superseded: list[str] = field(default_factory=list)
    supersede_cause: str = ""

    def enqueue(self, message_id: str, received_at: str) -> None:
        if any(e.message_id == message_id for e in self.inbox):
            return
        # A message the task already read, handed over again, is not read a second time
        # (a second turn for one message).
        if message_id in self.consumed:
            return
        self.inbox.append(InboxEntry(message_id, received_at))

    def consume(self, message_ids: list[str]) -> None:
        """The model saw these: out of the inbox, into the bounded consumed list."""
        self.inbox = [e for e in self.inbox if e.message_id not in message_ids]
        kept = [m for m in self.consumed if m not in message_ids] + message_ids
        self.consumed = kept[-CONSUMED_KEPT:]

    def begin_turn(self, *, model_turn: bool, exhausted: bool) -> None:
        self.model_turn = model_turn
        self.end_state = None
        self.progress, self.asked, self.exhausted = False, False, exhausted


def restore(inp: TaskInput, received_at: str) -> TaskRunState:
    """A run's state from its input: a new task's first message, or what the previous
    run carried."""
    state = TaskRunState(
        inp=inp,
        kind=TaskKind(inp.kind),
        status=TaskStatus(inp.status),
        turn=inp.turn,
        stop_reason=inp.stop_reason,
        inbox=list(inp.inbox),
        consumed=list(inp.consumed_messages),
        waiting={o: OrderStatus.SUBMITTED for o in inp.waiting_orders},
        present_orders=set(inp.present_orders),
        open_cards=dict(inp.open_cards),
        answered=set(inp.answered_cards),
        idle_turns=inp.idle_turns,
    )
    if inp.first_message_id:
        state.enqueue(inp.first_message_id, received_at)
    return state


def carry(s: TaskRunState) -> TaskInput:
    """What the next run starts with: the ids and limits, and the compact state."""
    uncollected_ = uncollected(s)
    return dataclasses.replace(
        s.inp,
        kind=s.kind,
        first_message_id=None,
        turn=s.turn,
        status=s.status,
        inbox=list(s.inbox),
        consumed_messages=list(s.consumed),
        waiting_orders=uncollected_,
        present_orders=sorted(s.present_orders & set(uncollected_)),
        open_cards=dict(s.open_cards),
        answered_cards=sorted(s.answered & set(s.open_cards)),
        idle_turns=s.idle_turns,
        stop_reason=s.stop_reason,
    )


def must_end(s: TaskRunState) -> bool:
    return s.stop_requested or s.archive_requested


def closed_reason(s: TaskRunState) -> str:
    """Why the task takes no more input ("" while it does)."""
    if s.status in CLOSED_STATUSES:
        return s.status
    if s.status == TaskStatus.COMPLETED and s.kind == TaskKind.LIGHTWEIGHT:
        return s.status
    if must_end(s):
        return STOPPING
    return ""


def has_work(s: TaskRunState) -> bool:
    if s.pause_requested:
        return True
    if s.open_cards and s.answered & set(s.open_cards):
        return True
    return bool(s.inbox) or s.wake


def unanswered(s: TaskRunState) -> set[str]:
    return set(s.open_cards) - s.answered


def parked_on_cards(s: TaskRunState) -> bool:
    return bool(unanswered(s)) and not (has_work(s) or must_end(s))


def waiting_reason(s: TaskRunState) -> str:
    if s.credit_cards & unanswered(s):
        return say("task.waiting_credit")
    return ""


def uncollected(s: TaskRunState) -> list[str]:
    return [o for o in s.waiting if o not in s.collected]


def unchecked(s: TaskRunState) -> list[str]:
    """Inbox ids not yet checked against the running jobs."""
    return [e.message_id for e in s.inbox if e.message_id not in s.checked]


def open_orders(s: TaskRunState) -> list[str]:
    return [o for o, status in s.waiting.items() if status not in TERMINAL_ORDER]


def snapshot(s: TaskRunState, idle_turns: int | None = None) -> TurnSnapshot:
    """The workflow's half of the stop-check's facts (see stopcheck.end_facts)."""
    return TurnSnapshot(
        kind=s.kind,
        stop_requested=must_end(s),
        paused=s.pause_requested,
        progress=s.progress,
        model_turn=s.model_turn,
        idle_turns=s.idle_turns if idle_turns is None else idle_turns,
        max_idle_turns=s.inp.max_turns_without_progress,
        # A job that finished before the turn ended still has to be collected and
        # shown: "open" until collected, not until its terminal signal.
        open_orders=len(uncollected(s)),
        open_cards=list(s.open_cards),
        answered=sorted(s.answered),
        inbox=len(s.inbox),
        # A step with calls never asked the person; the model step sets its own (runtime.py).
        asked_person=s.asked,
    )


def view(s: TaskRunState) -> TaskView:
    return TaskView(
        status=s.status,
        kind=s.kind,
        turn=s.turn,
        inbox=[e.message_id for e in s.inbox],
        waiting_orders=open_orders(s),
        open_cards=sorted(s.open_cards),
        stop_reason=s.stop_reason,
    )

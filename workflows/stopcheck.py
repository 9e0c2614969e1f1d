"""The stop-check after every turn, as a pure function of compact state.

Deterministic and free of I/O, so the workflow can call it and tests can enumerate it.
Order matters: a person's stop or pause wins over everything; finished work completes;
waiting (jobs, cards) parks without a model call; limits and idling stop with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from activities.types import TurnState
from lomo.states import OrderStatus, TaskKind
from lomo.words import say


@dataclass
class TurnSnapshot:
    """The workflow's half of the stop-check's facts; the turn's state from the activity
    that ended the turn is the other half."""

    kind: str
    stop_requested: bool
    paused: bool
    progress: bool  # the turn's calls so far
    model_turn: bool
    idle_turns: int  # before this turn
    max_idle_turns: int
    open_orders: int  # uncollected
    open_cards: list[str]
    answered: list[str]
    inbox: int
    asked_person: bool


@dataclass
class TurnFacts:
    kind: str  # TaskKind
    stop_requested: bool = False
    paused: bool = False
    steps_exhausted: bool = False  # the turn hit max_steps_per_turn without ending
    progress: bool = False  # new artifact, a checklist step done, a job submitted
    idle_turns: int = 0  # consecutive turns without progress, this one included
    max_idle_turns: int = 2
    checklist_total: int = 0
    checklist_open: int = 0  # neither done nor skipped
    blocked: str = ""  # title/reason of a blocked step, if any
    checkpoint_due: str = ""  # id of a step awaiting the person's confirmation, no card yet
    open_orders: int = 0
    open_cards: int = 0
    inbox: int = 0  # messages that arrived and were not seen yet
    asked_person: bool = False  # the model ended its turn with a question to the person


@dataclass
class Verdict:
    # stop | pause | complete | wait_jobs | wait_cards | checkpoint | next_turn | wait_input
    action: str
    reason: str = ""


def stop_check(f: TurnFacts) -> Verdict:
    if f.stop_requested:
        return Verdict("stop", say("task.stopped_by_person"))
    if f.paused:
        return Verdict("pause", say("task.paused_by_person"))
    if f.checklist_total and not f.checklist_open and not f.open_orders:
        return Verdict("complete", say("task.checklist_done"))
    if f.open_orders:
        return Verdict("wait_jobs", say("task.waiting_jobs"))
    if f.open_cards:
        return Verdict("wait_cards", say("task.waiting_answer"))
    if f.checkpoint_due:
        return Verdict("checkpoint", say("task.checkpoint", item=f.checkpoint_due))
    if f.blocked:
        return Verdict("stop", say("task.blocked", reason=f.blocked))
    if f.steps_exhausted:
        return Verdict("stop", say("task.max_steps"))
    if f.inbox:
        return Verdict("next_turn", say("task.new_messages"))
    if f.asked_person:
        return Verdict("wait_input", say("task.asked"))
    if not f.checklist_total:
        # No plan: a lightweight task is done once it answered; a persistent one waits.
        if f.kind == TaskKind.LIGHTWEIGHT:
            return Verdict("complete", say("task.answered"))
        return Verdict("wait_input", say("task.answered_waiting"))
    if f.progress:
        return Verdict("next_turn", say("task.progress"))
    if f.idle_turns >= f.max_idle_turns:
        return Verdict("stop", say("task.no_progress", turns=f.idle_turns))
    return Verdict("next_turn", say("task.trying_again"))


@dataclass
class JobsEnded:
    """The jobs a turn waited on, once they ended and were collected."""

    statuses: dict[str, str]  # order_id -> final status
    present: list[str]  # planned `present_when_done`: the result is the answer
    assets: list[str]  # collected into an asset
    inbox: int = 0  # the person wrote meanwhile
    open_cards: int = 0
    paused: bool = False


def presents_result(j: JobsEnded, state: TurnState) -> bool:
    """Wake the model, or present the results and let the stop-check end the turn? Present
    only when the plan said each result is the answer, each job succeeded into an asset,
    and nothing asks for a decision: no message, card, pause or open checklist step."""
    finished = bool(j.statuses) and all(
        status == OrderStatus.SUCCEEDED and o in j.present and o in j.assets
        for o, status in j.statuses.items()
    )
    waiting = j.inbox or j.open_cards or j.paused
    planned = state.checklist_open or state.checkpoint_due or state.blocked
    return finished and not waiting and not planned


# The verdicts that park the task on the person: its status is `waiting_user`.
WAITS_FOR_PERSON = ("wait_cards", "wait_input")


def idle_after(snap: TurnSnapshot, progress: bool) -> int:
    """Idle turns after this one: only a model turn that neither progressed nor waited
    counts; running a confirmed call again is the person's doing, not the model's."""
    if progress:
        return 0
    return snap.idle_turns + 1 if snap.model_turn else snap.idle_turns


def end_facts(
    snap: TurnSnapshot,
    state: TurnState,
    *,
    progress: bool,
    steps_exhausted: bool = False,
) -> TurnFacts:
    """The facts of a turn's end, from the workflow's snapshot and the turn's state read
    from the DB by the activity that ended the turn."""
    progress = progress or snap.progress or state.progress
    cards = {*snap.open_cards, *state.open_cards}
    return TurnFacts(
        kind=snap.kind,
        stop_requested=snap.stop_requested,
        paused=snap.paused,
        steps_exhausted=steps_exhausted,
        progress=progress,
        idle_turns=idle_after(snap, progress),
        max_idle_turns=snap.max_idle_turns,
        checklist_total=state.checklist_total,
        checklist_open=state.checklist_open,
        blocked=state.blocked,
        checkpoint_due=state.checkpoint_due,
        open_orders=snap.open_orders,
        open_cards=len(cards - set(snap.answered)),
        inbox=snap.inbox,
        asked_person=snap.asked_person,
    )

"""TaskWorkflow's compact state and the small predicates over it (see workflows/task.py).

Only ids, counters and statuses live here; contexts, responses and tool outputs stay in
the DB. `_carry` is what `continue_as_new` takes along, `_restore` reads it back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.runtime import RuntimeActivities
    from activities.types import StatusInput, TurnState
    from workflows.common import DB_TIMEOUT, FINAL_ORDER, RETRY
    from workflows.stopcheck import TurnSnapshot
    from workflows.types import InboxEntry, TaskInput

A = TypeVar("A")
R = TypeVar("R")

STATUS_KEY = SearchAttributeKey.for_keyword("LomoTaskStatus")
KIND_KEY = SearchAttributeKey.for_keyword("LomoTaskKind")
USER_KEY = SearchAttributeKey.for_keyword("LomoUserId")
WAITING_SINCE_KEY = SearchAttributeKey.for_datetime("LomoWaitingSince")

MODEL_TIMEOUT = timedelta(minutes=5)
TOOL_TIMEOUT = timedelta(minutes=2)
WAITING_STATUSES = ("waiting_generation", "waiting_user", "paused")
# How many consumed message ids a task remembers (and carries across continue-as-new). A
# consumed id comes back only from a hand-off that read the message as not yet arrived just
# before the task read it (the relay's round, a client's retry, the api's fallback through
# the main thread): seconds, in which a task reads a few messages, not hundreds. 256 ids
# are about 7 KB of carried input.
CONSUMED_KEPT = 256


class Stopped(Exception):
    """Internal: the person stopped the task while we were waiting."""


class Completed(Exception):
    """Internal: a lightweight task completed; the workflow ends."""


class TaskState:
    def __init__(self) -> None:
        self.inp: TaskInput | None = None
        self.kind = "lightweight"
        self.status = "running"
        self._shown = ""  # the status the search attribute last got
        self.stop_reason = ""
        self.turn = 0
        self.inbox: list[InboxEntry] = []
        self.consumed: list[str] = []  # the latest CONSUMED_KEPT ids the model has seen
        self.waiting: dict[str, str] = {}  # order_id -> last known status
        self.collected: set[str] = set()
        # Orders whose call was planned `present_when_done` (their result is the answer),
        # until their job ends; and the ones the next status write presents.
        self.present_orders: set[str] = set()
        self._presenting: list[str] = []
        self.open_cards: dict[str, str] = {}  # card_id -> call_id to run again, or ""
        # Open cards of calls short of balance: the task says it waits for credit. Not
        # carried across continue-as-new (a task parked on cards does not roll over).
        self.credit_cards: set[str] = set()
        self.answered: set[str] = set()
        self.idle_turns = 0
        self._model_turn = False
        self._progress = self._asked = self._exhausted = False
        # The turn's state as read by the activity that ended it (TaskWorkflow._after_turn).
        self._end_state: TurnState | None = None
        self.wake = False
        self.stop_requested = False
        self.archive_requested = False
        self.pause_requested = False
        self.resume_requested = False

    async def _set_status(self, status: str, reason: str = "", waiting: bool = False) -> None:
        assert self.inp is not None
        self._upsert(status, waiting)
        # A presented result goes in with the status the stop-check decided after it (one
        # reply, written only if that status change applies).
        present, self._presenting = self._presenting, []
        await self._db_activity(
            RuntimeActivities.set_task_status,
            StatusInput(
                self.inp.task_id, status, reason, self.kind, fence=self._fence(), present=present
            ),
        )

    async def _db_activity(self, fn: Callable[[RuntimeActivities, A], Awaitable[R]], arg: A) -> R:
        """A short DB-only activity, run as a local activity: no activity task round trip
        through the server, only a marker in history."""
        return await workflow.execute_local_activity_method(
            fn, arg, start_to_close_timeout=DB_TIMEOUT, retry_policy=RETRY
        )

    def _fence(self) -> int:
        """The fencing token of a status decided now: the workflow time, which grows from
        one workflow task to the next, also across runs. A worker that resumes a workflow
        task another worker has redone since writes an older token, and is refused."""
        return int(workflow.now().timestamp() * 1_000_000)

    def _upsert(self, status: str, waiting: bool = False) -> None:
        assert self.inp is not None
        self.status = self._shown = status
        updates: list[SearchAttributeUpdate[Any]] = [
            STATUS_KEY.value_set(status),
            KIND_KEY.value_set(self.kind),
            USER_KEY.value_set(self.inp.user_id),
            WAITING_SINCE_KEY.value_set(workflow.now())
            if waiting
            else WAITING_SINCE_KEY.value_unset(),
        ]
        workflow.upsert_search_attributes(updates)

    # --- small predicates and state carrying -------------------------------------------
    def _enqueue(self, message_id: str) -> None:
        if any(e.message_id == message_id for e in self.inbox):
            return
        # A message the task already read, handed over again, is not read a second time
        # (a second turn for one message).
        if message_id in self.consumed:
            return
        self.inbox.append(InboxEntry(message_id, workflow.now().isoformat()))

    def _consume(self, message_ids: list[str]) -> None:
        """The model saw these: out of the inbox, into the bounded consumed list."""
        self.inbox = [e for e in self.inbox if e.message_id not in message_ids]
        kept = [m for m in self.consumed if m not in message_ids] + message_ids
        self.consumed = kept[-CONSUMED_KEPT:]

    def _closed_reason(self) -> str:
        if self.status in ("stopped", "archived", "failed"):
            return self.status
        if self.status == "completed" and self.kind == "lightweight":
            return self.status
        if self.stop_requested or self.archive_requested:
            return "stopping"
        return ""

    def _refuse_if_closed(self, what: str) -> None:
        if reason := self._closed_reason():
            raise ApplicationError(f"task is {reason} and takes no {what}", type="TaskClosed")

    def _parked_on_cards(self) -> bool:
        unanswered = set(self.open_cards) - self.answered
        return bool(unanswered) and not (self._has_work() or self._must_end())

    def _waiting_reason(self) -> str:
        if self.credit_cards & (set(self.open_cards) - self.answered):
            return "waiting for credit: a paid call needs more balance"
        return ""

    def _has_work(self) -> bool:
        if self.pause_requested:
            return True
        if self.open_cards and self.answered & set(self.open_cards):
            return True
        return bool(self.inbox) or self.wake

    def _heartbeat(self) -> timedelta:
        assert self.inp is not None
        return timedelta(seconds=self.inp.heartbeat_timeout_seconds)

    def _must_end(self) -> bool:
        return self.stop_requested or self.archive_requested

    def _should_rollover(self) -> bool:
        return workflow.info().is_continue_as_new_suggested()

    def _restore(self, inp: TaskInput) -> None:
        self.inp = inp
        self.kind = inp.kind
        self.turn = inp.turn
        self.status = inp.status
        self.stop_reason = inp.stop_reason
        self.inbox = list(inp.inbox)
        self.consumed = list(inp.consumed_messages)
        self.waiting = {o: "submitted" for o in inp.waiting_orders}
        self.present_orders = set(inp.present_orders)
        self.open_cards = dict(inp.open_cards)
        self.answered = set(inp.answered_cards)
        self.idle_turns = inp.idle_turns
        if inp.first_message_id:
            self._enqueue(inp.first_message_id)

    def _carry(self) -> TaskInput:
        assert self.inp is not None
        i = self.inp
        return TaskInput(
            i.task_id,
            i.user_id,
            self.kind,
            None,
            i.max_steps_per_turn,
            i.generation_wait_seconds,
            i.max_turns_without_progress,
            i.card_wait_seconds,
            i.heartbeat_timeout_seconds,
            turn=self.turn,
            status=self.status,
            inbox=list(self.inbox),
            consumed_messages=list(self.consumed),
            waiting_orders=self._uncollected(),
            present_orders=sorted(self.present_orders & set(self._uncollected())),
            open_cards=dict(self.open_cards),
            answered_cards=sorted(self.answered & set(self.open_cards)),
            idle_turns=self.idle_turns,
            stop_reason=self.stop_reason,
            running_visible_seconds=i.running_visible_seconds,
        )

    def _snapshot(self, idle_turns: int | None = None, unseen: int = -1) -> TurnSnapshot:
        """The workflow's half of the stop-check's facts (see stopcheck.end_facts)."""
        assert self.inp is not None
        return TurnSnapshot(
            kind=self.kind,
            stop_requested=self.stop_requested or self.archive_requested,
            paused=self.pause_requested,
            progress=self._progress,
            model_turn=self._model_turn,
            idle_turns=self.idle_turns if idle_turns is None else idle_turns,
            max_idle_turns=self.inp.max_turns_without_progress,
            # A job that finished before the turn ended still has to be collected and
            # shown: "open" until collected, not until its terminal signal.
            open_orders=len(self._uncollected()),
            open_cards=list(self.open_cards),
            answered=sorted(self.answered),
            # A model step about to read the inbox passes 0: what it reads is not unseen.
            inbox=len(self.inbox) if unseen < 0 else unseen,
            # A step with calls never asked the person; the model step sets its own (runtime.py).
            asked_person=self._asked,
        )

    def _uncollected(self) -> list[str]:
        return [o for o in self.waiting if o not in self.collected]

    def _open_orders(self) -> list[str]:
        return [o for o, s in self.waiting.items() if s not in FINAL_ORDER]

"""TaskWorkflow: one per task (id `task:{task_id}`), the loop of ARCHITECTURE §3.

Only compact state lives here (ids, counters, statuses); contexts, responses and tool
outputs stay in the DB and travel as references. Every decision after a turn goes
through `stop_check` (workflows/stopcheck.py), so waiting on a job or a card is parked
and costs no model call.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey, SearchAttributeUpdate
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.stopcheck import TurnFacts, stop_check
    from workflows.types import (
        TERMINAL_TASK_STATUSES,
        CardRef,
        CardState,
        CheckpointInput,
        GenerationEvent,
        InboxEntry,
        OrderRef,
        OrderState,
        ResumeInput,
        StatusInput,
        StepDecision,
        StepInput,
        TaskInput,
        ToolInput,
        ToolOutcome,
        TurnState,
        TurnStateInput,
    )

STATUS_KEY = SearchAttributeKey.for_keyword("LomoTaskStatus")
KIND_KEY = SearchAttributeKey.for_keyword("LomoTaskKind")
USER_KEY = SearchAttributeKey.for_keyword("LomoUserId")
WAITING_SINCE_KEY = SearchAttributeKey.for_datetime("LomoWaitingSince")

MODEL_TIMEOUT = timedelta(minutes=5)
TOOL_TIMEOUT = timedelta(minutes=2)
DB_TIMEOUT = timedelta(seconds=30)
RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))
WAITING_STATUSES = ("waiting_generation", "waiting_user", "paused")
FINAL_ORDER = ("succeeded", "failed")


class Stopped(Exception):
    """Internal: the person stopped the task while we were waiting."""


@workflow.defn(name="TaskWorkflow")
class TaskWorkflow:
    def __init__(self) -> None:
        self.inp: TaskInput | None = None
        self.kind = "lightweight"
        self.status = "running"
        self.stop_reason = ""
        self.turn = 0
        self.inbox: list[InboxEntry] = []
        self.waiting: dict[str, str] = {}  # order_id -> last known status
        self.collected: set[str] = set()
        self.open_cards: dict[str, str] = {}  # card_id -> call_id to run again, or ""
        self.answered: set[str] = set()
        self.idle_turns = 0
        self._model_turn = False
        self._progress = self._asked = self._exhausted = False
        self.wake = False
        self.stop_requested = False
        self.archive_requested = False
        self.pause_requested = False
        self.resume_requested = False

    # --- inputs (updates validate; signals come from other workflows) ----------------
    @workflow.update(name="message")
    def message(self, message_id: str) -> str:
        self._enqueue(message_id)
        return self.status

    @message.validator
    def _validate_message(self, message_id: str) -> None:
        if not message_id:
            raise ApplicationError("message_id is required", type="InvalidInput")
        self._refuse_if_closed("messages")

    @workflow.signal(name="deliver")
    def deliver(self, message_id: str) -> None:
        # The main thread checked the task before routing; a closed task drops it (the
        # message stays in the DB as evidence, unprocessed).
        if message_id and not self._closed_reason():
            self._enqueue(message_id)

    @workflow.update(name="card_answered")
    def card_answered(self, card_id: str) -> str:
        self.answered.add(card_id)
        return self.status

    @card_answered.validator
    def _validate_card(self, card_id: str) -> None:
        self._refuse_if_closed("card answers")
        if card_id not in self.open_cards:
            raise ApplicationError(f"card {card_id} is not open in this task", type="UnknownCard")

    @workflow.signal(name="generation_event")
    def generation_event(self, ev: GenerationEvent) -> None:
        # Duplicates and events for unknown orders change nothing (the DB is the truth).
        if ev.order_id in self.waiting and self.waiting[ev.order_id] not in FINAL_ORDER:
            self.waiting[ev.order_id] = ev.status

    @workflow.update(name="stop")
    def stop(self) -> str:
        self.stop_requested = True
        return "stopping"

    @stop.validator
    def _validate_stop(self) -> None:
        if self.status in TERMINAL_TASK_STATUSES:
            raise ApplicationError(f"task is already {self.status}", type="TaskClosed")

    @workflow.update(name="pause")
    def pause(self) -> str:
        self.pause_requested = True
        return "pausing"

    @pause.validator
    def _validate_pause(self) -> None:
        self._refuse_if_closed("pause")

    @workflow.update(name="resume")
    def resume(self, inp: ResumeInput) -> str:
        assert self.inp is not None
        if inp.max_steps_per_turn:
            self.inp.max_steps_per_turn = inp.max_steps_per_turn
        if inp.max_turns_without_progress:
            self.inp.max_turns_without_progress = inp.max_turns_without_progress
        self.pause_requested = False
        self.resume_requested = True
        return "resuming"

    @resume.validator
    def _validate_resume(self, inp: ResumeInput) -> None:
        # A workflow that is still running while "stopped" was stopped by the runtime (a
        # limit, a blocked step) and can go on; the person's own stop ends the workflow.
        if self._must_end():
            raise ApplicationError("task is being stopped and cannot resume", type="TaskClosed")
        if self.status not in ("paused", "stopped"):
            raise ApplicationError(f"task is {self.status}, not paused", type="NotPaused")
        for v in (inp.max_steps_per_turn, inp.max_turns_without_progress):
            if v is not None and not 1 <= v <= 1000:
                raise ApplicationError("limits must be between 1 and 1000", type="InvalidInput")

    @workflow.update(name="archive")
    def archive(self) -> str:
        self.archive_requested = True
        return "archiving"

    @workflow.signal(name="promote")
    def promote(self) -> None:
        # In place: same workflow, context and journal; only the kind changes.
        if self.kind == "lightweight" and not self._closed_reason():
            self.kind = "persistent"
            self._upsert(self.status)

    @workflow.query(name="state")
    def state(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "kind": self.kind,
            "turn": self.turn,
            "inbox": [e.message_id for e in self.inbox],
            "waiting_orders": [o for o, s in self.waiting.items() if s not in FINAL_ORDER],
            "open_cards": sorted(self.open_cards),
            "stop_reason": self.stop_reason,
        }

    # --- main loop ------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: TaskInput) -> str:
        self._restore(inp)
        self._upsert(self.status)
        try:
            while True:
                if self._parked_on_cards():
                    await self._wait_for_cards_or_input()
                    continue
                await workflow.wait_condition(
                    lambda: self._has_work() or self._must_end() or self._should_rollover()
                )
                if self._must_end():
                    raise Stopped()
                if not self._has_work():
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    workflow.continue_as_new(self._carry())
                if self.pause_requested:
                    await self._park_paused()
                    continue
                if self.answered & set(self.open_cards):
                    await self._on_cards_answered()
                else:
                    await self._turn()
                await self._after_turn()
        except Stopped:
            return await self._finish("archived" if self.archive_requested else "stopped")
        except _Completed:
            return await self._finish("completed")

    # --- one turn: steps of inference plus tool calls --------------------------------
    async def _turn(self) -> None:
        assert self.inp is not None
        self.wake = False
        if self.status != "running":
            await self._set_status("running")
        self.turn += 1
        self._model_turn = True
        self._progress, self._asked, self._exhausted = False, False, True
        for step in range(1, self.inp.max_steps_per_turn + 1):
            consumed = [e.message_id for e in self.inbox]
            decision: StepDecision = await workflow.execute_activity(
                "model_step",
                StepInput(self.inp.task_id, self.turn, step, consumed),
                result_type=StepDecision,
                start_to_close_timeout=MODEL_TIMEOUT,
                heartbeat_timeout=self._heartbeat(),
                retry_policy=RETRY,
            )
            # Only what the model actually saw is processed; later arrivals wait for the
            # next step, never attributed to the running one.
            self.inbox = [e for e in self.inbox if e.message_id not in consumed]
            if self.stop_requested or self.archive_requested:
                raise Stopped()  # the decision is stored; its calls never run
            call_ids = [f"{self.inp.task_id}:{self.turn}:{step}:{c.index}" for c in decision.calls]
            # Independent calls of one step run in parallel.
            asked_before = set(self.open_cards)
            await asyncio.gather(*(self._call(cid) for cid in call_ids))
            if set(self.open_cards) - asked_before:
                # A question to the person ends the turn: no more (paid) steps pile up
                # cards before the person answered.
                self._exhausted = False
                break
            if decision.end_turn or self.pause_requested:
                self._exhausted = False
                self._asked = decision.asked_person
                break

    async def _call(self, call_id: str) -> None:
        assert self.inp is not None
        outcome: ToolOutcome = await workflow.execute_activity(
            "run_tool",
            ToolInput(self.inp.task_id, call_id),
            result_type=ToolOutcome,
            start_to_close_timeout=TOOL_TIMEOUT,
            heartbeat_timeout=self._heartbeat(),
            retry_policy=RETRY,
        )
        self._progress = self._progress or outcome.made_progress
        if outcome.order_id and outcome.order_id not in self.waiting:
            self.waiting[outcome.order_id] = "submitted"
        if outcome.card_id:
            pending_call = call_id if outcome.status == "needs_confirmation" else ""
            self.open_cards.setdefault(outcome.card_id, pending_call)

    # --- after a turn: the stop-check and the waits it decides -------------------------
    async def _after_turn(self) -> None:
        assert self.inp is not None
        state = await self._turn_state()
        progress = self._progress or state.progress
        # Only a model turn that neither progressed nor waited counts as idling; running a
        # confirmed call again is the person's doing, not the model's.
        if progress:
            self.idle_turns = 0
        elif self._model_turn:
            self.idle_turns += 1
        while True:
            for card_id in state.open_cards:
                self.open_cards.setdefault(card_id, "")
            facts = TurnFacts(
                kind=self.kind,
                stop_requested=self.stop_requested or self.archive_requested,
                paused=self.pause_requested,
                steps_exhausted=self._exhausted,
                progress=progress,
                idle_turns=self.idle_turns,
                max_idle_turns=self.inp.max_turns_without_progress,
                checklist_total=state.checklist_total,
                checklist_open=state.checklist_open,
                blocked=state.blocked,
                checkpoint_due=state.checkpoint_due,
                # A job that finished before the turn ended still has to be collected and
                # shown: "open" until collected, not until its terminal signal.
                open_orders=len(self._uncollected()),
                open_cards=len(set(self.open_cards) - self.answered),
                inbox=len(self.inbox),
                asked_person=self._asked,
            )
            verdict = stop_check(facts)
            if verdict.action == "stop":
                if facts.stop_requested:
                    raise Stopped()
                await self._park_stopped(verdict.reason)
                return
            if verdict.action == "pause":
                return  # the main loop parks it
            if verdict.action == "complete":
                await self._complete(verdict.reason)
                return
            if verdict.action == "wait_jobs":
                self.idle_turns = 0
                await self._await_orders()
                # A finished job wakes the task only when the plan needs it: a lightweight
                # task reports its result; a persistent one goes on if steps remain.
                state = await self._turn_state()
                self._exhausted, self._asked = False, False
                if self.kind == "lightweight" or state.checklist_open:
                    if not state.checkpoint_due:
                        self.wake = True
                        return
                progress = True
                continue
            if verdict.action == "checkpoint":
                card: CardRef = await workflow.execute_activity(
                    "create_checkpoint_card",
                    CheckpointInput(self.inp.task_id, state.checkpoint_due),
                    result_type=CardRef,
                    start_to_close_timeout=DB_TIMEOUT,
                    retry_policy=RETRY,
                )
                self.open_cards.setdefault(card.card_id, "")
                state.checkpoint_due = ""
                continue
            if verdict.action in ("wait_cards", "wait_input"):
                # The main loop waits for the answer (or a message, stop, pause).
                self.idle_turns = 0
                await self._set_status("waiting_user", waiting=True)
                return
            self.wake = True  # next_turn
            return

    async def _on_cards_answered(self) -> None:
        """A price card answered: run the same call again (same call_id, no model call).
        Any other card: the answer is input for the model's next turn."""
        self._progress, self._asked, self._exhausted = False, False, False
        self._model_turn = False
        rerun = []
        for card_id in sorted(self.answered & set(self.open_cards)):
            call_id = self.open_cards.pop(card_id)
            if call_id:
                rerun.append(call_id)
            else:
                self.wake = True
        await asyncio.gather(*(self._call(cid) for cid in rerun))
        if self.wake:
            self.wake = False
            await self._turn()

    async def _turn_state(self) -> TurnState:
        assert self.inp is not None
        state: TurnState = await workflow.execute_activity(
            "turn_state",
            TurnStateInput(self.inp.task_id, self.turn),
            result_type=TurnState,
            start_to_close_timeout=DB_TIMEOUT,
            retry_policy=RETRY,
        )
        return state

    # --- waits ------------------------------------------------------------------------
    def _uncollected(self) -> list[str]:
        return [o for o in self.waiting if o not in self.collected]

    def _open_orders(self) -> list[str]:
        return [o for o, s in self.waiting.items() if s not in FINAL_ORDER]

    async def _await_orders(self) -> None:
        await self._set_status("waiting_generation", waiting=True)
        for order_id in self._open_orders():
            await self._wait_terminal(order_id, honour_stop=True)
        for order_id in self._uncollected():
            await self._collect(order_id)
        await self._set_status("running")

    async def _wait_terminal(self, order_id: str, honour_stop: bool) -> None:
        """Wait for a job's end: its signal, or a compensating poll after each timer."""
        assert self.inp is not None
        wait = timedelta(seconds=self.inp.generation_wait_seconds)
        while self.waiting.get(order_id) not in FINAL_ORDER:
            try:
                await workflow.wait_condition(
                    lambda: (
                        self.waiting.get(order_id) in FINAL_ORDER
                        or (honour_stop and self._must_end())
                    ),
                    timeout=wait,
                )
            except TimeoutError:
                pass
            if honour_stop and self._must_end():
                raise Stopped()
            if self.waiting.get(order_id) not in FINAL_ORDER:
                # A lost callback must not park the task forever.
                st: OrderState = await workflow.execute_activity(
                    "poll_generation",
                    OrderRef(order_id),
                    result_type=OrderState,
                    start_to_close_timeout=TOOL_TIMEOUT,
                    retry_policy=RETRY,
                )
                self.waiting[order_id] = st.status

    async def _collect(self, order_id: str) -> None:
        await workflow.execute_activity(
            "collect_generation",
            OrderRef(order_id),
            result_type=OrderState,
            start_to_close_timeout=TOOL_TIMEOUT,
            retry_policy=RETRY,
        )
        self.collected.add(order_id)

    async def _wait_for_cards_or_input(self) -> None:
        """Parked on the person; a timer re-reads open cards from the DB in case an
        answer's wake-up was lost (the answer itself is durable there)."""
        assert self.inp is not None
        try:
            await workflow.wait_condition(
                lambda: self._has_work() or self._must_end() or self.pause_requested,
                timeout=timedelta(seconds=self.inp.card_wait_seconds),
            )
        except TimeoutError:
            for card_id in sorted(set(self.open_cards) - self.answered):
                st: CardState = await workflow.execute_activity(
                    "card_state",
                    CardRef(card_id),
                    result_type=CardState,
                    start_to_close_timeout=DB_TIMEOUT,
                    retry_policy=RETRY,
                )
                if st.status != "open":
                    self.answered.add(card_id)

    async def _park_paused(self) -> None:
        await self._set_status("paused", "paused by the person", waiting=True)
        await workflow.wait_condition(lambda: self.resume_requested or self._must_end())
        self.resume_requested = False
        if self._must_end():
            raise Stopped()
        await self._set_status("running")
        self.wake = True

    async def _park_stopped(self, reason: str) -> None:
        """Stopped by the runtime (a limit, a blocked step): resumable, e.g. with a raised
        limit; the person's own stop ends the workflow instead."""
        self.stop_reason = reason
        await self._set_status("stopped", reason)
        await workflow.wait_condition(lambda: self.resume_requested or self._must_end())
        self.resume_requested = False
        if self._must_end():
            raise Stopped()
        self.idle_turns = 0
        self.stop_reason = ""
        await self._set_status("running")
        self.wake = True

    async def _complete(self, reason: str) -> None:
        await self._set_status("completed", reason)
        if self.kind == "lightweight":
            raise _Completed()
        # A persistent task's work is done for now; a follow-up days later reopens it.

    # --- ending -----------------------------------------------------------------------
    async def _finish(self, status: str) -> str:
        if status != self.status:
            reason = "stopped by the person" if status == "stopped" else ""
            await self._set_status(status, reason)
        # Upstream jobs cannot be cancelled: let them end, keep the asset, wake nothing.
        for order_id in self._uncollected():
            await self._wait_terminal(order_id, honour_stop=False)
            await self._collect(order_id)
        return status

    async def _set_status(self, status: str, reason: str = "", waiting: bool = False) -> None:
        assert self.inp is not None
        self._upsert(status, waiting)
        await workflow.execute_activity(
            "set_task_status",
            StatusInput(self.inp.task_id, status, reason, self.kind),
            start_to_close_timeout=DB_TIMEOUT,
            retry_policy=RETRY,
        )

    def _upsert(self, status: str, waiting: bool = False) -> None:
        assert self.inp is not None
        self.status = status
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
        if all(e.message_id != message_id for e in self.inbox):
            self.inbox.append(InboxEntry(message_id, workflow.now().isoformat()))

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
        self.waiting = {o: "submitted" for o in inp.waiting_orders}
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
            waiting_orders=self._uncollected(),
            open_cards=dict(self.open_cards),
            answered_cards=sorted(self.answered & set(self.open_cards)),
            idle_turns=self.idle_turns,
            stop_reason=self.stop_reason,
        )


class _Completed(Exception):
    """Internal: a lightweight task completed; the workflow ends."""

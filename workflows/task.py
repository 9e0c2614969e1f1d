"""TaskWorkflow: one per task (id `task:{task_id}`), the task's loop (docs/architecture.md).

Read top to bottom: the inputs (updates from the api, validated; signals from other
workflows), then `run`, which waits for work and runs turns; `_turn` is the steps of one
turn (inference, then the step's tool calls in parallel); `_after_turn` asks `stop_check`
(workflows/stopcheck.py) what follows; then the waits it decides, each parked without a
model call and with a timer that re-reads the DB, so a lost wake-up never parks a task
forever. The state is one `TaskRunState` (workflows/task_state.py); the names the api
calls are the contract in lomo/contracts/task.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey, SearchAttributeUpdate
from temporalio.exceptions import ActivityError, ApplicationError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from activities.generation import GenerationActivities
    from activities.runtime import RuntimeActivities
    from activities.segments import SegmentActivities
    from activities.types import (
        CheckpointInput,
        OrderRef,
        ReviewInput,
        SegmentInput,
        StatusInput,
        StepInput,
        SupersedeInput,
        ToolInput,
        ToolOutcome,
        TurnState,
        TurnStateInput,
    )
    from lomo.contracts import flow_run as flow_contract
    from lomo.contracts import task as contract
    from lomo.contracts.flow_run import FlowRunInput
    from lomo.contracts.task import FlowEvent, GenerationEvent, ResumeInput, TaskInput, TaskView
    from lomo.states import TERMINAL_ORDER, TERMINAL_TASK, OrderStatus, TaskKind, TaskStatus
    from lomo.words import say
    from workflows import task_state as ts
    from workflows.common import DB_TIMEOUT, RETRY, backoff, card_unanswered
    from workflows.stopcheck import (
        WAITS_FOR_PERSON,
        JobsEnded,
        end_facts,
        presents_result,
        stop_check,
    )
    from workflows.task_state import TaskRunState

from workflows.flow_run import FlowRunWorkflow

A = TypeVar("A")
R = TypeVar("R")

STATUS_KEY = SearchAttributeKey.for_keyword("LomoTaskStatus")
KIND_KEY = SearchAttributeKey.for_keyword("LomoTaskKind")
USER_KEY = SearchAttributeKey.for_keyword("LomoUserId")
WAITING_SINCE_KEY = SearchAttributeKey.for_datetime("LomoWaitingSince")

MODEL_TIMEOUT = timedelta(minutes=5)
TOOL_TIMEOUT = timedelta(minutes=2)
# Call statuses that park the call on a card: the same call runs again once it is answered.
PARKED_CALLS = ("needs_confirmation", "needs_credit")
# The patch that stops a closed task's running jobs upstream instead of waiting for them.
CANCEL_ON_STOP = "cancel-jobs-on-stop"
# The patch that cancels jobs whose request a message took away while they ran: the
# message they were made for moved to another task, or the person changed the request.
CANCEL_ON_CHANGE = "cancel-jobs-on-change"
# A summary is an optimization: after a few failures the context keeps one line per step.
SUMMARY_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
# Early job ends kept at once: a turn places a handful of orders, not dozens.
EARLY_ENDS_KEPT = 32
EARLY_END_PATCH = "early-job-end"
# A confirmed call run again that made no job (its submit failed, it was refused) wakes
# the model, which says why; before this the task waited on the person with no word.
RERUN_SAYS_WHY = "rerun-without-work-wakes"


class Stopped(Exception):
    """Internal: the person stopped the task while we were waiting."""


class Completed(Exception):
    """Internal: a lightweight task completed; the workflow ends."""


def _refusal(key: str, kind: str, **values: Any) -> ApplicationError:
    """An update's refusal: the api returns its message to the person as a 409."""
    return ApplicationError(say(key, **values), type=kind)


@workflow.defn(name=contract.WORKFLOW)
class TaskWorkflow:
    @workflow.init
    def __init__(self, inp: TaskInput) -> None:
        # Restored before any handler runs: an update can be handled in a run's first
        # workflow task, before `run` starts, and must see the carried state (status,
        # messages read), not the defaults.
        self.state: TaskRunState = ts.restore(inp, workflow.now().isoformat())

    # --- inputs: updates from the api (validated), signals from other workflows ---------
    @workflow.update(name=contract.MESSAGE)
    def message(self, message_id: str) -> str:
        # A held or already read id is taken again and changes nothing (see enqueue).
        self.state.enqueue(message_id, workflow.now().isoformat())
        return self.state.status

    @message.validator
    def _validate_message(self, message_id: str) -> None:
        if not message_id:
            raise _refusal("task.message_required", "InvalidInput")
        if message_id in self.state.consumed:
            # Read already, even if the task has closed since: a refusal would be a 409, and
            # the api would send the message through the main thread to be read again.
            return
        self._refuse_if_closed("task.closed_messages")

    @workflow.signal(name=contract.DELIVER)
    def deliver(self, message_id: str) -> None:
        # The main thread checked the task before routing; a closed task drops it (the
        # message stays in the DB as evidence, unprocessed).
        if message_id and not ts.closed_reason(self.state):
            self.state.enqueue(message_id, workflow.now().isoformat())

    @workflow.signal(name=contract.TAKEN_BACK)
    def taken_back(self, message_id: str) -> None:
        # The person withdrew the message, or moved it to another task, before a step took
        # it (the database decided that): it leaves the inbox, and a later hand-off of it
        # is taken as one already read (no turn runs for it).
        if message_id:
            self.state.consume([message_id])

    @workflow.update(name=contract.CARD_ANSWERED)
    def card_answered(self, card_id: str) -> str:
        self.state.answered.add(card_id)
        return self.state.status

    @card_answered.validator
    def _validate_card(self, card_id: str) -> None:
        self._refuse_if_closed("task.closed_cards")
        if card_id not in self.state.open_cards:
            raise _refusal("task.card_not_open", "UnknownCard", card_id=card_id)

    @workflow.signal(name=contract.GENERATION_EVENT)
    def generation_event(self, ev: GenerationEvent) -> None:
        # Duplicates and events for unknown orders change nothing (the DB is the truth).
        waiting = self.state.waiting
        if ev.order_id in waiting and waiting[ev.order_id] not in TERMINAL_ORDER:
            waiting[ev.order_id] = ev.status
        elif ev.order_id not in waiting and ev.status in TERMINAL_ORDER:
            # The job ended before the call that placed it returned: kept for that call.
            early = self.state.early_ends
            early[ev.order_id] = ev.status
            while len(early) > EARLY_ENDS_KEPT:
                early.pop(next(iter(early)))

    @workflow.signal(name=contract.FLOW_EVENT)
    def flow_event(self, ev: FlowEvent) -> None:
        # A flow run ended or needs the person: the next turn sees it in the context.
        if not ts.closed_reason(self.state):
            self.state.wake = True

    @workflow.update(name=contract.STOP)
    def stop(self) -> str:
        self.state.stop_requested = True
        return ts.STOPPING

    @stop.validator
    def _validate_stop(self) -> None:
        if self.state.status in TERMINAL_TASK:
            raise _refusal("task.already_closed", "TaskClosed", status=self.state.status)

    @workflow.update(name=contract.PAUSE)
    def pause(self) -> str:
        self.state.pause_requested = True
        return "pausing"

    @pause.validator
    def _validate_pause(self) -> None:
        self._refuse_if_closed("task.closed_pause")

    @workflow.update(name=contract.RESUME)
    def resume(self, inp: ResumeInput) -> str:
        s = self.state
        if inp.max_steps_per_turn:
            s.inp.max_steps_per_turn = inp.max_steps_per_turn
        if inp.max_turns_without_progress:
            s.inp.max_turns_without_progress = inp.max_turns_without_progress
        s.pause_requested = False
        s.resume_requested = True
        return "resuming"

    @resume.validator
    def _validate_resume(self, inp: ResumeInput) -> None:
        # A workflow that is still running while "stopped" was stopped by the runtime (a
        # limit, a blocked step) and can go on; the person's own stop ends the workflow.
        s = self.state
        if ts.must_end(s):
            raise _refusal("task.stopping_no_resume", "TaskClosed")
        if s.status not in (TaskStatus.PAUSED, TaskStatus.STOPPED):
            raise _refusal("task.not_paused", "NotPaused", status=s.status)
        for v in (inp.max_steps_per_turn, inp.max_turns_without_progress):
            if v is not None and not 1 <= v <= 1000:
                raise _refusal("task.limits_range", "InvalidInput")

    @workflow.update(name=contract.ARCHIVE)
    def archive(self) -> str:
        self.state.archive_requested = True
        return "archiving"

    @workflow.signal(name=contract.PROMOTE)
    def promote(self) -> None:
        # In place: same workflow, context and journal; only the kind changes.
        s = self.state
        if s.kind == TaskKind.LIGHTWEIGHT and not ts.closed_reason(s):
            s.kind = TaskKind.PERSISTENT
            self._upsert(s.status)

    @workflow.query(name=contract.STATE)
    def view(self) -> TaskView:
        return ts.view(self.state)

    def _refuse_if_closed(self, key: str) -> None:
        if reason := ts.closed_reason(self.state):
            raise _refusal(key, "TaskClosed", status=reason)

    # --- the loop -------------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: TaskInput) -> str:
        s = self.state
        self._upsert(s.status)
        try:
            while True:
                if ts.parked_on_cards(s):
                    await self._wait_for_cards_or_input()
                    continue
                await workflow.wait_condition(
                    lambda: ts.has_work(s) or ts.must_end(s) or self._should_rollover()
                )
                if ts.must_end(s):
                    raise Stopped()
                if not ts.has_work(s):
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    workflow.continue_as_new(ts.carry(s))
                if s.pause_requested:
                    await self._park_paused()
                    continue
                if s.answered & set(s.open_cards):
                    await self._on_cards_answered()
                else:
                    await self._turn()
                await self._after_turn()
        except Stopped:
            return await self._finish(
                TaskStatus.ARCHIVED if s.archive_requested else TaskStatus.STOPPED
            )
        except Completed:
            return await self._finish(TaskStatus.COMPLETED)

    def _should_rollover(self) -> bool:
        return workflow.info().is_continue_as_new_suggested()

    # --- one turn: steps of inference plus tool calls --------------------------------
    async def _turn(self) -> None:
        s = self.state
        s.wake = False
        # The turn's first model step writes the "running" status: no status activity.
        running: StatusInput | None = None
        if s.status != TaskStatus.RUNNING:
            s.status = TaskStatus.RUNNING
            running = StatusInput(s.inp.task_id, s.status, "", s.kind, fence=self._fence())
        s.turn += 1
        # The search attribute follows after `running_visible_seconds`, from a timer: an
        # upsert sent with the model step's scheduling would hold the step back by its
        # visibility write, and a turn shorter than that is neither parked nor stuck.
        show = None
        if s.shown != TaskStatus.RUNNING:
            show = asyncio.create_task(self._show_running_later(s.turn))
        try:
            await self._steps(running)
        finally:
            if show is not None:
                show.cancel()  # the turn ended first: the timer goes, nothing is written

    async def _show_running_later(self, turn: int) -> None:
        s = self.state
        await workflow.sleep(timedelta(seconds=s.inp.running_visible_seconds))
        if s.turn == turn and s.status == TaskStatus.RUNNING:
            self._upsert(TaskStatus.RUNNING)

    async def _steps(self, running: StatusInput | None) -> None:
        """The turn's steps: inference, then the step's calls, until the turn ends."""
        s = self.state
        s.begin_turn(model_turn=True, exhausted=True)
        for step in range(1, s.inp.max_steps_per_turn + 1):
            consumed = [e.message_id for e in s.inbox]
            decision = await workflow.execute_activity_method(
                RuntimeActivities.model_step,
                StepInput(s.inp.task_id, s.turn, step, consumed, s.inp.user_id, running),
                start_to_close_timeout=MODEL_TIMEOUT,
                heartbeat_timeout=self._heartbeat(),
                retry_policy=RETRY,
            )
            running = None
            # Only what the model actually saw is processed; later arrivals wait for the
            # next step, never attributed to the running one.
            s.consume(consumed)
            if ts.must_end(s):
                raise Stopped()  # the decision is stored; its calls never run
            call_ids = [f"{s.inp.task_id}:{s.turn}:{step}:{c.index}" for c in decision.calls]
            s.end_state = decision.turn_state
            # The one call of a step that ends the turn reads the turn's state after it ran
            # (with parallel calls no single one runs last: the state is read after them).
            ends_with = s.turn if decision.end_turn and len(call_ids) == 1 else 0
            # Independent calls of one step run in parallel.
            asked_before = set(s.open_cards)
            work: list[Awaitable[ToolOutcome | None]] = [
                self._call(cid, ends_with, c.name)
                for cid, c in zip(call_ids, decision.calls, strict=True)
            ]
            if decision.segment_closed >= 0:
                # Beside the calls, not after them: no extra sequential activity per step.
                work.append(self._summarize(decision.segment_closed))
            outcomes = [o for o in await asyncio.gather(*work) if isinstance(o, ToolOutcome)]
            if set(s.open_cards) - asked_before:
                # A question to the person ends the turn: no more (paid) steps pile up
                # cards before the person answered.
                s.exhausted = False
                break
            if decision.end_turn or s.pause_requested:
                s.exhausted = False
                s.asked = decision.asked_person
                break
            if outcomes and all(o.present for o in outcomes) and not s.inbox:
                # The plan says these jobs' results are the answer: until they end there
                # is nothing to decide, so no model step to acknowledge the submit.
                s.exhausted = False
                break

    async def _call(self, call_id: str, ends_turn: int = 0, name: str = "") -> ToolOutcome:
        s = self.state
        outcome = await workflow.execute_activity_method(
            RuntimeActivities.run_tool,
            ToolInput(s.inp.task_id, call_id, ends_turn, name),
            start_to_close_timeout=TOOL_TIMEOUT,
            heartbeat_timeout=self._heartbeat(),
            retry_policy=RETRY,
        )
        s.progress = s.progress or outcome.made_progress
        if outcome.order_id and outcome.order_id not in s.waiting:
            s.waiting[outcome.order_id] = OrderStatus.SUBMITTED
            ended = s.early_ends.pop(outcome.order_id, None)
            # Histories from before this knew no early end: they waited for the poll.
            if ended is not None and workflow.patched(EARLY_END_PATCH):
                s.waiting[outcome.order_id] = ended
        if outcome.present and outcome.order_id:
            s.present_orders.add(outcome.order_id)
        if outcome.card_id:
            # A call waiting on a price or credit card runs again once the card is answered.
            pending_call = call_id if outcome.status in PARKED_CALLS else ""
            s.open_cards.setdefault(outcome.card_id, pending_call)
            if outcome.status == "needs_credit":
                s.credit_cards.add(outcome.card_id)
        if outcome.turn_state is not None:
            s.end_state = outcome.turn_state
        if outcome.flow_run:
            await self._start_flow_run(outcome.flow_run)
        return outcome

    async def _start_flow_run(self, run_id: str) -> None:
        """A flow run outlives the turn and the task's continue-as-new (abandoned child);
        it signals `flow_event` back when it ends or needs the person."""
        try:
            await workflow.start_child_workflow(
                FlowRunWorkflow.run,
                FlowRunInput(run_id),
                id=flow_contract.workflow_id(run_id),
                parent_close_policy=ParentClosePolicy.ABANDON,
            )
        except WorkflowAlreadyStartedError:
            pass  # started by an earlier attempt of this call, or by the person

    async def _summarize(self, segment: int) -> None:
        try:
            await workflow.execute_activity_method(
                SegmentActivities.summarize_segment,
                SegmentInput(self.state.inp.task_id, segment),
                start_to_close_timeout=MODEL_TIMEOUT,
                heartbeat_timeout=self._heartbeat(),
                retry_policy=SUMMARY_RETRY,
            )
        except ActivityError:
            workflow.logger.warning("segment %d stays unsummarized", segment)

    # --- after a turn: the stop-check and the waits it decides -------------------------
    async def _after_turn(self) -> None:
        s = self.state
        # The activity that ended the turn (the model step without calls, or the turn's one
        # call) returned the turn's state; after parallel calls, or a rerun of confirmed
        # calls, no single activity ran last and `turn_state` reads it.
        state = s.end_state if s.end_state is not None else await self._turn_state()
        s.end_state = None
        before = s.idle_turns
        progress = s.progress or state.progress
        while True:
            for card_id in state.open_cards:
                s.open_cards.setdefault(card_id, "")
            facts = end_facts(
                ts.snapshot(s, before), state, progress=progress, steps_exhausted=s.exhausted
            )
            s.idle_turns = facts.idle_turns
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
                s.idle_turns = 0
                ended = await self._await_orders()
                # A finished job wakes the task only when the plan needs it: a result the
                # plan called the answer is presented with the status that follows (no
                # model call); otherwise a lightweight task reports its result, and so
                # does a persistent one without a plan (a promoted one: nothing else
                # would show it), and a planned one goes on if steps remain.
                state = await self._turn_state()
                s.exhausted, s.asked = False, False
                if presents_result(ended, state) and await self._results_meet_briefs(
                    sorted(ended.statuses)
                ):
                    s.presenting = sorted(ended.statuses)
                    progress = True
                    continue
                unplanned = not state.checklist_total
                if s.kind == TaskKind.LIGHTWEIGHT or unplanned or state.checklist_open:
                    if not state.checkpoint_due:
                        s.wake = True
                        return
                progress = True
                continue
            if verdict.action == "checkpoint":
                card = await workflow.execute_activity_method(
                    RuntimeActivities.create_checkpoint_card,
                    CheckpointInput(s.inp.task_id, state.checkpoint_due),
                    start_to_close_timeout=DB_TIMEOUT,
                    retry_policy=RETRY,
                )
                s.open_cards.setdefault(card.card_id, "")
                state.checkpoint_due = ""
                continue
            if verdict.action in WAITS_FOR_PERSON:
                # The main loop waits for the answer (or a message, stop, pause).
                s.idle_turns = 0
                await self._set_status(TaskStatus.WAITING_USER, ts.waiting_reason(s), waiting=True)
                return
            s.wake = True  # next_turn
            return

    async def _on_cards_answered(self) -> None:
        """A price card answered: run the same call again (same call_id, no model call).
        Any other card: the answer is input for the model's next turn."""
        s = self.state
        s.begin_turn(model_turn=False, exhausted=False)
        rerun = []
        for card_id in sorted(s.answered & set(s.open_cards)):
            call_id = s.open_cards.pop(card_id)
            s.credit_cards.discard(card_id)
            if call_id:
                rerun.append(call_id)
            else:
                s.wake = True
        outcomes = await asyncio.gather(*(self._call(cid) for cid in rerun))
        if any(not self._led_to_work(o) for o in outcomes) and workflow.patched(RERUN_SAYS_WHY):
            s.wake = True
        if s.wake:
            s.wake = False
            await self._turn()

    def _led_to_work(self, outcome: ToolOutcome) -> bool:
        """A rerun confirmed call led to what the answer approved: a job to wait on, or a
        new question (another card). An error, a refusal or the answered card again did
        not: the model's next turn reads the call's result and tells the person."""
        if outcome.order_id is not None or outcome.flow_run:
            return True
        return outcome.card_id is not None and outcome.card_id not in self.state.answered

    async def _turn_state(self) -> TurnState:
        s = self.state
        return await self._db_activity(
            RuntimeActivities.turn_state, TurnStateInput(s.inp.task_id, s.turn)
        )

    # --- waits: on jobs, on the person, paused or stopped ------------------------------
    async def _await_orders(self) -> JobsEnded:
        """Park until the turn's jobs end, collect them, and say how they ended."""
        s = self.state
        await self._set_status(TaskStatus.WAITING_GENERATION, waiting=True)
        watch = workflow.patched(CANCEL_ON_CHANGE)
        waited = ts.uncollected(s)
        for order_id in ts.open_orders(s):
            await self._wait_terminal(order_id, honour_stop=True, watch=watch)
        assets = [o for o in ts.uncollected(s) if await self._collect(o)]
        cancelled, cause = s.superseded, s.supersede_cause
        s.checked, s.superseded, s.supersede_cause = set(), [], ""
        await self._set_status(TaskStatus.RUNNING, cancelled=cancelled, cause=cause)
        present = [o for o in waited if o in s.present_orders]
        s.present_orders -= set(waited)
        return JobsEnded(
            statuses={o: s.waiting[o] for o in waited},
            present=present,
            assets=assets,
            inbox=len(s.inbox),
            open_cards=len(ts.unanswered(s)),
            paused=s.pause_requested,
        )

    async def _wait_terminal(self, order_id: str, honour_stop: bool, watch: bool = False) -> None:
        """Wait for a job's end: its signal, or a compensating poll after each timer. The
        timer doubles up to a cap (a job the upstream never finishes adds few events; its
        deadline, checked by the poll, fails it). `watch`: a message that arrives meanwhile
        is checked for taking the request away from the jobs (then they are cancelled)."""
        s = self.state
        polls = 0
        while s.waiting.get(order_id) not in TERMINAL_ORDER:
            inp = s.inp
            wait = backoff(inp.generation_wait_seconds, inp.generation_wait_max_seconds, polls)
            polls += 1
            try:
                await workflow.wait_condition(
                    lambda: (
                        s.waiting.get(order_id) in TERMINAL_ORDER
                        or (honour_stop and ts.must_end(s))
                        or (watch and bool(ts.unchecked(s)))
                    ),
                    timeout=wait,
                )
            except TimeoutError:
                pass
            if honour_stop and ts.must_end(s):
                raise Stopped()
            if watch and ts.unchecked(s):
                await self._cancel_superseded()
                polls -= 1  # woken by a message, not the timer: the wait does not grow
                continue
            if s.waiting.get(order_id) not in TERMINAL_ORDER:
                # A lost callback must not park the task forever.
                st = await workflow.execute_activity_method(
                    GenerationActivities.poll_generation,
                    OrderRef(order_id),
                    start_to_close_timeout=TOOL_TIMEOUT,
                    heartbeat_timeout=self._heartbeat(),
                    retry_policy=RETRY,
                )
                s.waiting[order_id] = st.status

    async def _collect(self, order_id: str) -> bool:
        """Collect a finished job; whether it became an asset."""
        st = await workflow.execute_activity_method(
            GenerationActivities.collect_generation,
            OrderRef(order_id),
            start_to_close_timeout=TOOL_TIMEOUT,
            # A dead worker's download is taken over after seconds, not the whole timeout.
            heartbeat_timeout=self._heartbeat(),
            retry_policy=RETRY,
        )
        self.state.collected.add(order_id)
        return st.object_id is not None

    async def _results_meet_briefs(self, order_ids: list[str]) -> bool:
        """A result is presented unasked only when it meets its brief; one that misses it
        wakes the model, which sees the picture and decides (make it again, or say what
        is off)."""
        review = await workflow.execute_activity_method(
            GenerationActivities.review_results,
            ReviewInput(self.state.inp.task_id, order_ids),
            start_to_close_timeout=TOOL_TIMEOUT,
            heartbeat_timeout=self._heartbeat(),
            retry_policy=RETRY,
        )
        return not review.misses

    async def _wait_for_cards_or_input(self) -> None:
        """Parked on the person; a timer re-reads open cards from the DB in case an
        answer's wake-up was lost (the answer itself is durable there). The timer doubles
        while nothing happens: cards left open for days add few events."""
        s = self.state
        try:
            await workflow.wait_condition(
                lambda: ts.has_work(s) or ts.must_end(s) or s.pause_requested,
                timeout=backoff(s.inp.card_wait_seconds, s.inp.card_wait_max_seconds, s.card_waits),
            )
            s.card_waits = 0
        except TimeoutError:
            s.card_waits += 1
            for card_id in sorted(ts.unanswered(s)):
                if not await card_unanswered(card_id):
                    s.answered.add(card_id)
                    s.card_waits = 0

    async def _park_paused(self) -> None:
        s = self.state
        await self._set_status(TaskStatus.PAUSED, say("task.paused_by_person"), waiting=True)
        await self._wait_for_resume()
        await self._set_status(TaskStatus.RUNNING)
        s.wake = True

    async def _park_stopped(self, reason: str) -> None:
        """Stopped by the runtime (a limit, a blocked step): resumable, e.g. with a raised
        limit; the person's own stop ends the workflow instead."""
        s = self.state
        s.stop_reason = reason
        await self._set_status(TaskStatus.STOPPED, reason)
        await self._wait_for_resume()
        s.idle_turns = 0
        s.stop_reason = ""
        await self._set_status(TaskStatus.RUNNING)
        s.wake = True

    async def _wait_for_resume(self) -> None:
        s = self.state
        await workflow.wait_condition(lambda: s.resume_requested or ts.must_end(s))
        s.resume_requested = False
        if ts.must_end(s):
            raise Stopped()

    async def _complete(self, reason: str) -> None:
        await self._set_status(TaskStatus.COMPLETED, reason)
        if self.state.kind == TaskKind.LIGHTWEIGHT:
            raise Completed()
        # A persistent task's work is done for now; a follow-up days later reopens it.

    async def _finish(self, status: TaskStatus) -> str:
        s = self.state
        cancelled: list[str] = []
        if status != TaskStatus.COMPLETED and workflow.patched(CANCEL_ON_STOP):
            # The person closed the task: nobody wants its running jobs' results.
            cancelled = await self._cancel_open_orders()
        if status != s.status:
            reason = say("task.stopped_by_person") if status == TaskStatus.STOPPED else ""
            await self._set_status(status, reason, cancelled=cancelled)
        # Jobs that ended first (and, before the patch, every job): let them end, keep the
        # asset, wake nothing.
        for order_id in ts.uncollected(s):
            await self._wait_terminal(order_id, honour_stop=False)
            await self._collect(order_id)
        return status

    async def _cancel_superseded(self) -> None:
        """The messages that arrived while the jobs ran, checked once each: the jobs they
        take the request away from are cancelled now, and said so when the wait ends. The
        messages stay in the inbox: the next turn reads them (and makes the new request)."""
        s = self.state
        ids = ts.unchecked(s)
        s.checked.update(ids)
        got = await workflow.execute_activity_method(
            GenerationActivities.superseded_orders,
            SupersedeInput(s.inp.task_id, s.inp.user_id, ids),
            start_to_close_timeout=TOOL_TIMEOUT,
            retry_policy=RETRY,
        )
        mine = [o for o in got.order_ids if o in ts.open_orders(s)]
        if mine:
            await self._cancel_orders(mine)
            s.superseded.extend(o for o in mine if o not in s.superseded)
            s.supersede_cause = got.cause

    async def _cancel_open_orders(self) -> list[str]:
        return await self._cancel_orders(ts.open_orders(self.state))

    async def _cancel_orders(self, open_ids: list[str]) -> list[str]:
        """Cancel jobs still running upstream, in parallel; each order ends in the state
        the upstream answers (cancelled, or how it had ended already)."""
        s = self.state
        states = await asyncio.gather(
            *(
                workflow.execute_activity_method(
                    GenerationActivities.cancel_generation,
                    OrderRef(order_id),
                    start_to_close_timeout=TOOL_TIMEOUT,
                    heartbeat_timeout=self._heartbeat(),
                    retry_policy=RETRY,
                )
                for order_id in open_ids
            )
        )
        for st in states:
            s.waiting[st.order_id] = st.status
        return open_ids

    # --- status writes and short DB activities ------------------------------------------
    async def _set_status(
        self,
        status: TaskStatus,
        reason: str = "",
        waiting: bool = False,
        cancelled: list[str] | None = None,
        cause: str = "",
    ) -> None:
        s = self.state
        self._upsert(status, waiting)
        # A presented result goes in with the status the stop-check decided after it (one
        # reply, written only if that status change applies).
        present, s.presenting = s.presenting, []
        await self._db_activity(
            RuntimeActivities.set_task_status,
            StatusInput(
                s.inp.task_id,
                status,
                reason,
                s.kind,
                fence=self._fence(),
                present=present,
                cancelled=cancelled or [],
                cancel_cause=cause,
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

    def _heartbeat(self) -> timedelta:
        return timedelta(seconds=self.state.inp.heartbeat_timeout_seconds)

    def _upsert(self, status: TaskStatus, waiting: bool = False) -> None:
        s = self.state
        s.status = status
        s.shown = status
        updates: list[SearchAttributeUpdate[Any]] = [
            STATUS_KEY.value_set(status),
            KIND_KEY.value_set(s.kind),
            USER_KEY.value_set(s.inp.user_id),
            WAITING_SINCE_KEY.value_set(workflow.now())
            if waiting
            else WAITING_SINCE_KEY.value_unset(),
        ]
        workflow.upsert_search_attributes(updates)

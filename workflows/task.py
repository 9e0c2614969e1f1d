"""TaskWorkflow: one per task (id `task:{task_id}`), the task's loop (docs/architecture.md).

Read top to bottom: `run` waits for work and runs turns; `_turn` is the steps of one turn
(inference, then the step's tool calls in parallel); `_after_turn` asks `stop_check`
(workflows/stopcheck.py) what follows. The inputs (updates, signals) are in
`task_inputs.py`, the waits in `task_waits.py`, the compact state in `task_state.py`.
Waiting on a job or a card is parked and costs no model call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from activities.flow_types import FlowRunInput
    from activities.runtime import RuntimeActivities
    from activities.segments import SegmentActivities
    from activities.types import (
        CheckpointInput,
        SegmentInput,
        StatusInput,
        StepInput,
        ToolInput,
        ToolOutcome,
        TurnState,
        TurnStateInput,
    )
    from workflows.stopcheck import WAITS_FOR_PERSON, end_facts, presents_result, stop_check
    from workflows.types import TaskInput

from workflows.flow_run import FlowRunWorkflow
from workflows.task_inputs import TaskInputs
from workflows.task_state import (
    DB_TIMEOUT,
    MODEL_TIMEOUT,
    RETRY,
    TOOL_TIMEOUT,
    Completed,
    Stopped,
)
from workflows.task_waits import TaskWaits

# Call statuses that park the call on a card: the same call runs again once it is answered.
PARKED_CALLS = ("needs_confirmation", "needs_credit")
# A summary is an optimization: after a few failures the context keeps one line per step.
SUMMARY_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)


@workflow.defn(name="TaskWorkflow")
class TaskWorkflow(TaskInputs, TaskWaits):
    @workflow.init
    def __init__(self, inp: TaskInput) -> None:
        super().__init__()
        # Restored before any handler runs: an update can be handled in a run's first
        # workflow task, before `run` starts, and must see the carried state (status,
        # messages read), not the defaults.
        self._restore(inp)

    @workflow.run
    async def run(self, inp: TaskInput) -> str:
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
        except Completed:
            return await self._finish("completed")

    # --- one turn: steps of inference plus tool calls --------------------------------
    async def _turn(self) -> None:
        assert self.inp is not None
        self.wake = False
        # The turn's first model step writes the "running" status: no status activity.
        running: StatusInput | None = None
        if self.status != "running":
            self.status = "running"
            running = StatusInput(self.inp.task_id, "running", "", self.kind, fence=self._fence())
        self.turn += 1
        # The search attribute follows after `running_visible_seconds`, from a timer: an
        # upsert sent with the model step's scheduling would hold the step back by its
        # visibility write, and a turn shorter than that is neither parked nor stuck.
        show = None
        if self._shown != "running":
            show = asyncio.create_task(self._show_running_later(self.turn))
        try:
            await self._steps(running)
        finally:
            if show is not None:
                show.cancel()  # the turn ended first: the timer goes, nothing is written

    async def _show_running_later(self, turn: int) -> None:
        assert self.inp is not None
        await workflow.sleep(timedelta(seconds=self.inp.running_visible_seconds))
        if self.turn == turn and self.status == "running":
            self._upsert("running")

    async def _steps(self, running: StatusInput | None) -> None:
        """The turn's steps: inference, then the step's calls, until the turn ends."""
        assert self.inp is not None
        self._model_turn = True
        self._end_state = None
        self._progress, self._asked, self._exhausted = False, False, True
        for step in range(1, self.inp.max_steps_per_turn + 1):
            consumed = [e.message_id for e in self.inbox]
            decision = await workflow.execute_activity_method(
                RuntimeActivities.model_step,
                StepInput(self.inp.task_id, self.turn, step, consumed, self.inp.user_id, running),
                start_to_close_timeout=MODEL_TIMEOUT,
                heartbeat_timeout=self._heartbeat(),
                retry_policy=RETRY,
            )
            running = None
            # Only what the model actually saw is processed; later arrivals wait for the
            # next step, never attributed to the running one.
            self._consume(consumed)
            if self.stop_requested or self.archive_requested:
                raise Stopped()  # the decision is stored; its calls never run
            call_ids = [f"{self.inp.task_id}:{self.turn}:{step}:{c.index}" for c in decision.calls]
            self._end_state = decision.turn_state
            # The one call of a step that ends the turn reads the turn's state after it ran
            # (with parallel calls no single one runs last: the state is read after them).
            ends_with = self.turn if decision.end_turn and len(call_ids) == 1 else 0
            # Independent calls of one step run in parallel.
            asked_before = set(self.open_cards)
            work: list[Awaitable[ToolOutcome | None]] = [
                self._call(cid, ends_with, c.name)
                for cid, c in zip(call_ids, decision.calls, strict=True)
            ]
            if decision.segment_closed >= 0:
                # Beside the calls, not after them: no extra sequential activity per step.
                work.append(self._summarize(decision.segment_closed))
            outcomes = [o for o in await asyncio.gather(*work) if isinstance(o, ToolOutcome)]
            if set(self.open_cards) - asked_before:
                # A question to the person ends the turn: no more (paid) steps pile up
                # cards before the person answered.
                self._exhausted = False
                break
            if decision.end_turn or self.pause_requested:
                self._exhausted = False
                self._asked = decision.asked_person
                break
            if outcomes and all(o.present for o in outcomes) and not self.inbox:
                # The plan says these jobs' results are the answer: until they end there
                # is nothing to decide, so no model step to acknowledge the submit.
                self._exhausted = False
                break

    async def _call(self, call_id: str, ends_turn: int = 0, name: str = "") -> ToolOutcome:
        assert self.inp is not None
        outcome = await workflow.execute_activity_method(
            RuntimeActivities.run_tool,
            ToolInput(self.inp.task_id, call_id, ends_turn, name),
            start_to_close_timeout=TOOL_TIMEOUT,
            heartbeat_timeout=self._heartbeat(),
            retry_policy=RETRY,
        )
        self._progress = self._progress or outcome.made_progress
        if outcome.order_id and outcome.order_id not in self.waiting:
            self.waiting[outcome.order_id] = "submitted"
        if outcome.present and outcome.order_id:
            self.present_orders.add(outcome.order_id)
        if outcome.card_id:
            # A call waiting on a price or credit card runs again once the card is answered.
            pending_call = call_id if outcome.status in PARKED_CALLS else ""
            self.open_cards.setdefault(outcome.card_id, pending_call)
            if outcome.status == "needs_credit":
                self.credit_cards.add(outcome.card_id)
        if outcome.turn_state is not None:
            self._end_state = outcome.turn_state
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
                id=f"flowrun:{run_id}",
                parent_close_policy=ParentClosePolicy.ABANDON,
            )
        except WorkflowAlreadyStartedError:
            pass  # started by an earlier attempt of this call, or by the person

    async def _summarize(self, segment: int) -> None:
        assert self.inp is not None
        try:
            await workflow.execute_activity_method(
                SegmentActivities.summarize_segment,
                SegmentInput(self.inp.task_id, segment),
                start_to_close_timeout=MODEL_TIMEOUT,
                heartbeat_timeout=self._heartbeat(),
                retry_policy=SUMMARY_RETRY,
            )
        except ActivityError:
            workflow.logger.warning("segment %d stays unsummarized", segment)

    # --- after a turn: the stop-check and the waits it decides -------------------------
    async def _after_turn(self) -> None:
        assert self.inp is not None
        # The activity that ended the turn (the model step without calls, or the turn's one
        # call) returned the turn's state; after parallel calls, or a rerun of confirmed
        # calls, no single activity ran last and `turn_state` reads it.
        state = self._end_state if self._end_state is not None else await self._turn_state()
        self._end_state = None
        before = self.idle_turns
        progress = self._progress or state.progress
        while True:
            for card_id in state.open_cards:
                self.open_cards.setdefault(card_id, "")
            facts = end_facts(
                self._snapshot(before), state, progress=progress, steps_exhausted=self._exhausted
            )
            self.idle_turns = facts.idle_turns
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
                ended = await self._await_orders()
                # A finished job wakes the task only when the plan needs it: a result the
                # plan called the answer is presented with the status that follows (no
                # model call); otherwise a lightweight task reports its result, and so
                # does a persistent one without a plan (a promoted one: nothing else
                # would show it), and a planned one goes on if steps remain.
                state = await self._turn_state()
                self._exhausted, self._asked = False, False
                if presents_result(ended, state) and await self._results_meet_briefs(
                    sorted(ended.statuses)
                ):
                    self._presenting = sorted(ended.statuses)
                    progress = True
                    continue
                unplanned = not state.checklist_total
                if self.kind == "lightweight" or unplanned or state.checklist_open:
                    if not state.checkpoint_due:
                        self.wake = True
                        return
                progress = True
                continue
            if verdict.action == "checkpoint":
                card = await workflow.execute_activity_method(
                    RuntimeActivities.create_checkpoint_card,
                    CheckpointInput(self.inp.task_id, state.checkpoint_due),
                    start_to_close_timeout=DB_TIMEOUT,
                    retry_policy=RETRY,
                )
                self.open_cards.setdefault(card.card_id, "")
                state.checkpoint_due = ""
                continue
            if verdict.action in WAITS_FOR_PERSON:
                # The main loop waits for the answer (or a message, stop, pause).
                self.idle_turns = 0
                await self._set_status("waiting_user", self._waiting_reason(), waiting=True)
                return
            self.wake = True  # next_turn
            return

    async def _on_cards_answered(self) -> None:
        """A price card answered: run the same call again (same call_id, no model call).
        Any other card: the answer is input for the model's next turn."""
        self._progress, self._asked, self._exhausted = False, False, False
        self._model_turn = False
        self._end_state = None
        rerun = []
        for card_id in sorted(self.answered & set(self.open_cards)):
            call_id = self.open_cards.pop(card_id)
            self.credit_cards.discard(card_id)
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
        return await self._db_activity(
            RuntimeActivities.turn_state, TurnStateInput(self.inp.task_id, self.turn)
        )

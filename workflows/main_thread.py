"""MainThreadWorkflow: one per user (id `main:{user_id}`); routes messages without a target.

Its state is only the queue of ids still to route: the task index itself lives in the DB
(routing), so the workflow's history stays small however many tasks exist, and it
continues as new whenever Temporal suggests it. Items are message ids, or ids of answered
`clarify` cards (the person chose a task for an earlier message).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from activities.routing import RoutingActivities
    from lomo.contracts import main_thread as contract
    from lomo.contracts import task as task_contract
    from lomo.contracts.main_thread import MainThreadInput
    from lomo.contracts.task import TaskInput
    from lomo.states import TaskKind
    from routing.types import RoutePlan, RouteRequest
    from workflows.common import RETRY


@workflow.defn(name=contract.WORKFLOW)
class MainThreadWorkflow:
    def __init__(self) -> None:
        self.pending: list[str] = []

    @workflow.signal(name=contract.ROUTE)
    def route(self, item_id: str) -> None:
        if item_id not in self.pending:
            self.pending.append(item_id)

    @workflow.run
    async def run(self, inp: MainThreadInput) -> None:
        self.pending.extend(m for m in inp.pending_message_ids if m not in self.pending)
        while True:
            await workflow.wait_condition(
                lambda: bool(self.pending) or workflow.info().is_continue_as_new_suggested()
            )
            if not self.pending or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    MainThreadInput(
                        user_id=inp.user_id,
                        pending_message_ids=list(self.pending),
                        heartbeat_timeout_seconds=inp.heartbeat_timeout_seconds,
                    )
                )
            item_id = self.pending[0]
            try:
                plan = await workflow.execute_activity_method(
                    RoutingActivities.route_message,
                    RouteRequest(inp.user_id, item_id),
                    start_to_close_timeout=timedelta(minutes=2),
                    heartbeat_timeout=timedelta(seconds=inp.heartbeat_timeout_seconds),
                    retry_policy=RETRY,
                )
            except ActivityError:
                # Non-retryable (unusable router output, unknown item): one bad message must
                # not end the person's main thread; they are told, the next item proceeds.
                await workflow.execute_activity_method(
                    RoutingActivities.route_failed,
                    RouteRequest(inp.user_id, item_id),
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=RETRY,
                )
                self.pending.pop(0)
                continue
            # A repeat (the api handed the same message over again after a retry) was
            # handed over by the activity that routed it first: never twice.
            if not plan.repeat:
                await self._hand_over(inp.user_id, plan, plan.message_id or item_id)
                if plan.left_task:
                    await self._tell_left(plan.left_task, plan)
            self.pending.pop(0)

    async def _hand_over(self, user_id: str, plan: RoutePlan, message_id: str) -> None:
        if not plan.task_id:
            return  # answered by main, or a clarify card is waiting for the person
        if plan.decision in ("lightweight", "new"):
            await self._start(user_id, plan, message_id)
            return
        # A completed persistent task's workflow is still alive and takes the message
        # itself; only a workflow that has ended is started again in place (below).
        if plan.decision in ("existing", "move"):
            handle = workflow.get_external_workflow_handle(task_contract.workflow_id(plan.task_id))
            try:
                if plan.promote:
                    # Before the message: it lands persistent.
                    await handle.signal(task_contract.PROMOTE)
                await handle.signal(task_contract.DELIVER, message_id)
            except FailureError:
                # The task ended between the check and the signal: start it again in place.
                workflow.logger.info("task %s ended meanwhile; restarting", plan.task_id)
                await self._start(user_id, plan, message_id)

    async def _tell_left(self, left_task: str, plan: RoutePlan) -> None:
        """A move: the task the message left drops it unread, or is told not to act on it
        further. A task that has ended acts on nothing more."""
        handle = workflow.get_external_workflow_handle(task_contract.workflow_id(left_task))
        try:
            if plan.left_notice:
                await handle.signal(task_contract.DELIVER, plan.left_notice)
            elif plan.left_message:
                await handle.signal(task_contract.TAKEN_BACK, plan.left_message)
        except FailureError:
            workflow.logger.info("task %s ended; nothing to tell it", left_task)

    async def _start(self, user_id: str, plan: RoutePlan, message_id: str) -> None:
        assert plan.task_id is not None
        await workflow.start_child_workflow(
            task_contract.WORKFLOW,
            TaskInput(
                task_id=plan.task_id,
                user_id=user_id,
                kind=plan.kind or TaskKind.LIGHTWEIGHT,
                first_message_id=message_id,
                turn=plan.turn,
                max_steps_per_turn=plan.max_steps_per_turn,
                generation_wait_seconds=plan.generation_wait_seconds,
                max_turns_without_progress=plan.max_turns_without_progress,
                card_wait_seconds=plan.card_wait_seconds,
                heartbeat_timeout_seconds=plan.heartbeat_timeout_seconds,
                generation_wait_max_seconds=plan.generation_wait_max_seconds,
                card_wait_max_seconds=plan.card_wait_max_seconds,
                running_visible_seconds=plan.running_visible_seconds,
            ),
            id=task_contract.workflow_id(plan.task_id),
            parent_close_policy=ParentClosePolicy.ABANDON,
        )

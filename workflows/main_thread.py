"""MainThreadWorkflow: one per user (id `main:{user_id}`); routes messages without a target."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from workflows.task import TaskWorkflow
    from workflows.types import MainThreadInput, RouteDecision, RouteInput, TaskInput

RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))


@workflow.defn(name="MainThreadWorkflow")
class MainThreadWorkflow:
    def __init__(self) -> None:
        self.pending: list[str] = []

    @workflow.signal(name="route")
    def route(self, message_id: str) -> None:
        if message_id not in self.pending:
            self.pending.append(message_id)

    @workflow.run
    async def run(self, inp: MainThreadInput) -> None:
        self.pending.extend(m for m in inp.pending_message_ids if m not in self.pending)
        while True:
            await workflow.wait_condition(
                lambda: bool(self.pending) or workflow.info().is_continue_as_new_suggested()
            )
            if not self.pending or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(MainThreadInput(inp.user_id, list(self.pending)))
            message_id = self.pending[0]
            decision: RouteDecision = await workflow.execute_activity(
                "route_message",
                RouteInput(inp.user_id, message_id),
                result_type=RouteDecision,
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=RETRY,
            )
            if decision.decision in ("lightweight", "new") and decision.task_id:
                await workflow.start_child_workflow(
                    TaskWorkflow.run,
                    TaskInput(
                        decision.task_id,
                        inp.user_id,
                        decision.kind or "lightweight",
                        message_id,
                        max_steps_per_turn=decision.max_steps_per_turn,
                        generation_wait_seconds=decision.generation_wait_seconds,
                    ),
                    id=f"task:{decision.task_id}",
                    parent_close_policy=ParentClosePolicy.ABANDON,
                )
            elif decision.decision == "existing" and decision.task_id:
                handle = workflow.get_external_workflow_handle(f"task:{decision.task_id}")
                await handle.signal("deliver", message_id)
            self.pending.pop(0)

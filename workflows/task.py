"""TaskWorkflow: one per task (id `task:{task_id}`), the loop of ARCHITECTURE §3."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey, SearchAttributeUpdate
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.types import (
        TERMINAL_TASK_STATUSES,
        GenerationEvent,
        OrderRef,
        OrderState,
        StatusInput,
        StepDecision,
        StepInput,
        TaskInput,
        ToolInput,
        ToolOutcome,
    )

STATUS_KEY = SearchAttributeKey.for_keyword("LomoTaskStatus")
KIND_KEY = SearchAttributeKey.for_keyword("LomoTaskKind")
USER_KEY = SearchAttributeKey.for_keyword("LomoUserId")
WAITING_SINCE_KEY = SearchAttributeKey.for_datetime("LomoWaitingSince")

MODEL_TIMEOUT = timedelta(minutes=5)
TOOL_TIMEOUT = timedelta(minutes=2)
DB_TIMEOUT = timedelta(seconds=30)
RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))


@workflow.defn(name="TaskWorkflow")
class TaskWorkflow:
    def __init__(self) -> None:
        self.inp: TaskInput | None = None
        self.inbox: list[str] = []
        self.status = "running"
        self.turn = 0
        self.waiting: dict[str, str] = {}  # order_id -> last known status
        self.collected: set[str] = set()
        self.wake = False
        self.stop_requested = False
        self.max_steps = 8
        self.wait_seconds = 60.0

    # --- inputs -----------------------------------------------------------------------
    @workflow.update(name="message")
    def message(self, message_id: str) -> str:
        if message_id not in self.inbox:
            self.inbox.append(message_id)
        return self.status

    @message.validator
    def _validate_message(self, message_id: str) -> None:
        if self.status in TERMINAL_TASK_STATUSES:
            raise ApplicationError(
                f"task is {self.status} and takes no messages", type="TaskClosed"
            )
        if not message_id:
            raise ApplicationError("message_id is required", type="InvalidInput")

    @workflow.signal(name="deliver")
    def deliver(self, message_id: str) -> None:
        if self.status not in TERMINAL_TASK_STATUSES and message_id not in self.inbox:
            self.inbox.append(message_id)

    @workflow.signal(name="generation_event")
    def generation_event(self, ev: GenerationEvent) -> None:
        # Duplicates and events for unknown orders change nothing (the DB is the truth).
        if ev.order_id in self.waiting and self.waiting[ev.order_id] not in ("succeeded", "failed"):
            self.waiting[ev.order_id] = ev.status

    @workflow.update(name="stop")
    def stop(self) -> str:
        self.stop_requested = True
        return "stopping"

    @workflow.query(name="state")
    def state(self) -> dict[str, object]:
        return {"status": self.status, "turn": self.turn, "inbox": list(self.inbox)}

    # --- main loop ----------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: TaskInput) -> str:
        self.inp = inp
        self.max_steps = inp.max_steps_per_turn
        self.wait_seconds = inp.generation_wait_seconds
        self.turn = inp.turn
        self.inbox = list(inp.pending_message_ids)
        if inp.first_message_id:
            self.inbox.append(inp.first_message_id)
        self._upsert("running")
        while True:
            await workflow.wait_condition(
                lambda: bool(self.inbox) or self.wake or self.stop_requested
            )
            if self.stop_requested:
                return await self._finish("stopped", "stopped by the person")
            self.wake = False
            self.turn += 1
            for step in range(1, self.max_steps + 1):
                consumed = list(self.inbox)
                decision: StepDecision = await workflow.execute_activity(
                    "model_step",
                    StepInput(inp.task_id, self.turn, step, consumed),
                    result_type=StepDecision,
                    start_to_close_timeout=MODEL_TIMEOUT,
                    retry_policy=RETRY,
                )
                # Only what the model actually saw is marked processed; later arrivals wait.
                self.inbox = [m for m in self.inbox if m not in consumed]
                for call in decision.calls:
                    outcome: ToolOutcome = await workflow.execute_activity(
                        "run_tool",
                        ToolInput(inp.task_id, f"{inp.task_id}:{self.turn}:{step}:{call.index}"),
                        result_type=ToolOutcome,
                        start_to_close_timeout=TOOL_TIMEOUT,
                        retry_policy=RETRY,
                    )
                    if outcome.order_id:
                        self.waiting[outcome.order_id] = "submitted"
                if decision.end_turn or self.stop_requested:
                    break
            # Stop-check (first version; the runtime issue deepens it).
            if self.stop_requested:
                return await self._finish("stopped", "stopped by the person")
            open_orders = [o for o, s in self.waiting.items() if s not in ("succeeded", "failed")]
            if open_orders:
                await self._await_orders(open_orders)
                if self.stop_requested:
                    return await self._finish("stopped", "stopped by the person")
                self.wake = True
                continue
            if not self.inbox and inp.kind == "lightweight":
                return await self._finish("completed", "")
            self._upsert("running")

    async def _await_orders(self, order_ids: list[str]) -> None:
        self._upsert("waiting_generation", waiting=True)
        await self._set_status("waiting_generation")
        for order_id in order_ids:
            if not await self._wait_terminal(order_id, honour_stop=True):
                return
            await self._collect(order_id)
        self._upsert("running")
        await self._set_status("running")

    def _terminal(self, order_id: str) -> bool:
        return self.waiting.get(order_id) in ("succeeded", "failed")

    async def _wait_terminal(self, order_id: str, honour_stop: bool) -> bool:
        """Wait for a job's end: its signal, or a compensating poll after each timer."""
        while not self._terminal(order_id):
            try:
                await workflow.wait_condition(
                    lambda: self._terminal(order_id) or (honour_stop and self.stop_requested),
                    timeout=timedelta(seconds=self.wait_seconds),
                )
            except TimeoutError:
                pass
            if honour_stop and self.stop_requested:
                return False
            if not self._terminal(order_id):
                # A lost callback must not park the task forever.
                st: OrderState = await workflow.execute_activity(
                    "poll_generation",
                    OrderRef(order_id),
                    result_type=OrderState,
                    start_to_close_timeout=TOOL_TIMEOUT,
                    retry_policy=RETRY,
                )
                self.waiting[order_id] = st.status
        return True

    async def _collect(self, order_id: str) -> None:
        await workflow.execute_activity(
            "collect_generation",
            OrderRef(order_id),
            result_type=OrderState,
            start_to_close_timeout=TOOL_TIMEOUT,
            retry_policy=RETRY,
        )
        self.collected.add(order_id)

    async def _set_status(self, status: str, reason: str = "") -> None:
        assert self.inp is not None
        self.status = status
        await workflow.execute_activity(
            "set_task_status",
            StatusInput(self.inp.task_id, status, reason),
            start_to_close_timeout=DB_TIMEOUT,
            retry_policy=RETRY,
        )

    async def _finish(self, status: str, reason: str) -> str:
        self._upsert(status)
        await self._set_status(status, reason)
        if status == "stopped":
            # Upstream jobs cannot be cancelled: let them end, keep the asset, wake nothing.
            for order_id in [o for o in self.waiting if o not in self.collected]:
                await self._wait_terminal(order_id, honour_stop=False)
                await self._collect(order_id)
        return status

    def _upsert(self, status: str, waiting: bool = False) -> None:
        assert self.inp is not None
        self.status = status
        updates: list[SearchAttributeUpdate[Any]] = [
            STATUS_KEY.value_set(status),
            KIND_KEY.value_set(self.inp.kind),
            USER_KEY.value_set(self.inp.user_id),
        ]
        updates.append(
            WAITING_SINCE_KEY.value_set(workflow.now())
            if waiting
            else WAITING_SINCE_KEY.value_unset()
        )
        workflow.upsert_search_attributes(updates)

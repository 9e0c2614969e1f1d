"""TaskWorkflow's waits: parked on jobs, on the person, paused or stopped. Each wait has
a timer that re-reads the DB, so a lost wake-up (callback, card answer) never parks a
task forever, and none of them calls the model."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.generation import GenerationActivities
    from activities.types import OrderRef, ReviewInput
    from workflows.common import card_unanswered
    from workflows.stopcheck import JobsEnded

from workflows.task_state import (
    FINAL_ORDER,
    RETRY,
    TOOL_TIMEOUT,
    Completed,
    Stopped,
    TaskState,
)


class TaskWaits(TaskState):
    async def _await_orders(self) -> JobsEnded:
        """Park until the turn's jobs end, collect them, and say how they ended."""
        await self._set_status("waiting_generation", waiting=True)
        waited = self._uncollected()
        for order_id in self._open_orders():
            await self._wait_terminal(order_id, honour_stop=True)
        assets = [o for o in self._uncollected() if await self._collect(o)]
        await self._set_status("running")
        present = [o for o in waited if o in self.present_orders]
        self.present_orders -= set(waited)
        return JobsEnded(
            statuses={o: self.waiting[o] for o in waited},
            present=present,
            assets=assets,
            inbox=len(self.inbox),
            open_cards=len(set(self.open_cards) - self.answered),
            paused=self.pause_requested,
        )

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
                st = await workflow.execute_activity_method(
                    GenerationActivities.poll_generation,
                    OrderRef(order_id),
                    start_to_close_timeout=TOOL_TIMEOUT,
                    retry_policy=RETRY,
                )
                self.waiting[order_id] = st.status

    async def _collect(self, order_id: str) -> bool:
        """Collect a finished job; whether it became an asset."""
        st = await workflow.execute_activity_method(
            GenerationActivities.collect_generation,
            OrderRef(order_id),
            start_to_close_timeout=TOOL_TIMEOUT,
            retry_policy=RETRY,
        )
        self.collected.add(order_id)
        return st.object_id is not None

    async def _results_meet_briefs(self, order_ids: list[str]) -> bool:
        """A result is presented unasked only when it meets its brief; one that misses it
        wakes the model, which sees the picture and decides (make it again, or say what
        is off)."""
        assert self.inp is not None
        review = await workflow.execute_activity_method(
            GenerationActivities.review_results,
            ReviewInput(self.inp.task_id, order_ids),
            start_to_close_timeout=TOOL_TIMEOUT,
            retry_policy=RETRY,
        )
        return not review.misses

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
                if not await card_unanswered(card_id):
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
            raise Completed()
        # A persistent task's work is done for now; a follow-up days later reopens it.

    async def _finish(self, status: str) -> str:
        if status != self.status:
            reason = "stopped by the person" if status == "stopped" else ""
            await self._set_status(status, reason)
        # Upstream jobs cannot be cancelled: let them end, keep the asset, wake nothing.
        for order_id in self._uncollected():
            await self._wait_terminal(order_id, honour_stop=False)
            await self._collect(order_id)
        return status

"""MemoryWorkflow: one per user (id `memory:{user_id}`); serializes the person's extraction,
forgetting and corrections, so a forget never races an extraction of the same person.

Each job is one activity; Temporal retries it with backoff. A job that still fails is put
aside and tried again after `retry_seconds` (a durable timer; a failed extraction is
retried later, article §7.4) while later jobs go on. Bad input (non-retryable) is dropped
with a log line. A confirmed forget is never given up: it is tried again every round until
it ran, and continue-as-new carries it (`MemoryInput.retry_later`), so a forget the person
confirmed runs even if they never write again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from memory.types import (
        CorrectInput,
        CorrectOutput,
        ExtractInput,
        ExtractOutput,
        ForgetInput,
        ForgetOutput,
        MemoryInput,
        MemoryJob,
    )

RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)
MAX_ROUNDS = 20  # a job that failed this many rounds is given up (logged); never a forget
# A forget whose activity failed every attempt waits a round like any other job (before,
# it was only answered "not yet" and left to the next extraction).
FORGET_RETRY_PATCH = "forget-retried-later"
# Continue-as-new is put off while an update waits for a queued job (before, it waited for
# the update, which waited for the job: for ever).
CAN_AFTER_QUEUE_PATCH = "continue-as-new-after-awaited-jobs"


@workflow.defn(name="MemoryWorkflow")
class MemoryWorkflow:
    def __init__(self) -> None:
        self.pending: list[MemoryJob] = []
        self.retry_later: list[MemoryJob] = []
        self.results: dict[str, Any] = {}

    def _add(self, job: MemoryJob) -> None:
        if not any(j.kind == job.kind and j.ref == job.ref for j in self.pending):
            self.pending.append(job)

    @workflow.signal(name="extract")
    def extract(self, message_id: str) -> None:
        self._add(MemoryJob("extract", message_id))

    @workflow.signal(name="forget")
    def forget(self, card_id: str) -> None:
        self._add(MemoryJob("forget", card_id))

    @workflow.update(name="forget_and_wait")
    async def forget_and_wait(self, card_id: str) -> str:
        """The forget cascade, answered once it ran: the api wakes the card's task only
        after this, so the task's next context is already without the forgotten content.
        If its round failed the answer is "not yet: ..." and the job runs again later."""
        self._add(MemoryJob("forget", card_id))
        key = f"forget:{card_id}"
        await workflow.wait_condition(lambda: key in self.results)
        return str(self.results.pop(key))

    @workflow.update(name="correct")
    async def correct(self, evidence_id: str) -> CorrectOutput:
        self._add(MemoryJob("correct", evidence_id))
        key = f"correct:{evidence_id}"
        await workflow.wait_condition(lambda: key in self.results)
        result = self.results.pop(key)
        if isinstance(result, str):
            raise ApplicationError(result, non_retryable=True)
        assert isinstance(result, CorrectOutput)
        return result

    @workflow.run
    async def run(self, inp: MemoryInput) -> None:
        for j in inp.pending:
            self._add(j)
        self.retry_later.extend(inp.retry_later)
        suggested = workflow.info().is_continue_as_new_suggested
        while True:
            try:
                await workflow.wait_condition(
                    lambda: bool(self.pending) or suggested(),
                    timeout=timedelta(seconds=inp.retry_seconds) if self.retry_later else None,
                )
            except TimeoutError:
                self.pending.extend(self.retry_later)
                self.retry_later.clear()
            if suggested() and not self._update_awaits_queue():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    MemoryInput(
                        inp.user_id,
                        inp.retry_seconds,
                        inp.activity_attempts,
                        self.pending,
                        self.retry_later,
                    )
                )
            if self.pending:
                await self._run_job(inp, self.pending.pop(0))

    def _update_awaits_queue(self) -> bool:
        """An update (`forget_and_wait`, `correct`) still running waits for its job, which is
        still queued: continue-as-new, which waits for running handlers, would wait for ever
        (and the confirmed forget never run), so the queue runs first."""
        return (
            bool(self.pending)
            and not workflow.all_handlers_finished()
            and workflow.patched(CAN_AFTER_QUEUE_PATCH)
        )

    async def _run_job(self, inp: MemoryInput, job: MemoryJob) -> None:
        user_id = inp.user_id
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=30),
            maximum_attempts=inp.activity_attempts,
        )
        opts: dict[str, Any] = {
            "start_to_close_timeout": timedelta(minutes=2),
            "retry_policy": retry,
        }
        try:
            if job.kind == "extract":
                await workflow.execute_activity(
                    "memory_extract",
                    ExtractInput(user_id, job.ref),
                    result_type=ExtractOutput,
                    **opts,
                )
            elif job.kind == "forget":
                await workflow.execute_activity(
                    "memory_forget", ForgetInput(user_id, job.ref), result_type=ForgetOutput, **opts
                )
                self.results[f"forget:{job.ref}"] = "forgotten"
            else:
                self.results[f"correct:{job.ref}"] = await workflow.execute_activity(
                    "memory_correct",
                    CorrectInput(user_id, job.ref),
                    result_type=CorrectOutput,
                    **opts,
                )
        except ActivityError as e:
            cause = e.cause
            final = isinstance(cause, ApplicationError) and cause.non_retryable
            if job.kind == "correct":
                self.results[f"correct:{job.ref}"] = str(cause or e)
            if job.kind == "forget":
                # The caller (`forget_and_wait`) is answered now, not after the next round:
                # the card's task waits for this answer, and "not yet" is true, the job
                # runs again below (the card is marked handed, so nothing else resends it).
                self.results[f"forget:{job.ref}"] = f"not yet: {cause or e}"
                if final:  # no such card, or not confirmed: no round will change that
                    workflow.logger.warning("memory forget %s dropped: %s", job.ref, cause)
                elif workflow.patched(FORGET_RETRY_PATCH):
                    job.attempts += 1
                    workflow.logger.warning(
                        "memory forget %s failed (round %d), again in %ss: %s",
                        job.ref,
                        job.attempts,
                        inp.retry_seconds,
                        cause or e,
                    )
                    self.retry_later.append(job)
            elif final or job.attempts + 1 >= MAX_ROUNDS:
                workflow.logger.warning("memory %s %s dropped: %s", job.kind, job.ref, cause)
            else:
                job.attempts += 1
                self.retry_later.append(job)

"""MemoryWorkflow: one per user (id `memory:{user_id}`); serializes the person's extraction,
forgetting and corrections, so a forget never races an extraction of the same person.

Each job is one activity; Temporal retries it with backoff. A job that still fails is put
aside and tried again after `retry_seconds` (a durable timer; a failed extraction is
retried later) while later jobs go on. Bad input (non-retryable) is dropped
with a log line. A confirmed forget is never given up: it is tried again every round until
it ran, and continue-as-new carries it (`MemoryInput.retry_later`), so a forget the person
confirmed runs even if they never write again.

Updates (`forget_and_wait`, `correct`) wait for their job's next round; every update of
one card (or correction) shares the one job and gets its outcome, and a repeat after the job
ran is answered at once from the outcomes kept for the run (`KEPT_OUTCOMES`; after
continue-as-new the activity finds its own record and answers just as fast).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.memory import MemoryActivities
    from lomo.contracts import memory as contract
    from memory.types import (
        CorrectInput,
        CorrectOutput,
        ExtractInput,
        ForgetInput,
        MemoryInput,
        MemoryJob,
    )

JOB_TIMEOUT = timedelta(minutes=2)
MAX_ROUNDS = 20  # a job that failed this many rounds is given up (logged); never a forget
KEPT_OUTCOMES = 64  # successful outcomes kept per run for repeated updates (oldest dropped)


@dataclass
class _Awaited:
    """The updates waiting for one job: how many, how many rounds it finished meanwhile,
    and the last round's outcome. Dropped when the last of them returned."""

    waiters: int = 0
    rounds: int = 0
    outcome: Any = None


@workflow.defn(name=contract.WORKFLOW)
class MemoryWorkflow:
    def __init__(self) -> None:
        self.pending: list[MemoryJob] = []
        self.retry_later: list[MemoryJob] = []
        self.awaited: dict[str, _Awaited] = {}
        self.done: dict[str, Any] = {}  # at most KEPT_OUTCOMES, oldest first
        self.running: MemoryJob | None = None

    def _add(self, job: MemoryJob) -> None:
        if not any(j.kind == job.kind and j.ref == job.ref for j in self.pending):
            self.pending.append(job)

    @workflow.signal(name=contract.EXTRACT)
    def extract(self, message_id: str) -> None:
        self._add(MemoryJob("extract", message_id))

    @workflow.signal(name=contract.FORGET)
    def forget(self, card_id: str) -> None:
        self._add(MemoryJob("forget", card_id))

    @workflow.update(name=contract.FORGET_AND_WAIT)
    async def forget_and_wait(self, card_id: str) -> str:
        """The forget cascade, answered once it ran: the api wakes the card's task only
        after this, so the task's next context is already without the forgotten content.
        If its round failed the answer is "not yet: ..." and the job runs again later."""
        return str(await self._outcome("forget", card_id))

    @workflow.update(name=contract.CORRECT)
    async def correct(self, evidence_id: str) -> CorrectOutput:
        result = await self._outcome("correct", evidence_id)
        if isinstance(result, str):
            raise ApplicationError(result, type="CorrectionFailed", non_retryable=True)
        assert isinstance(result, CorrectOutput)
        return result

    async def _outcome(self, kind: str, ref: str) -> Any:
        """The outcome of the job's next round (or of its round that already succeeded)."""
        key = f"{kind}:{ref}"
        if key in self.done:
            return self.done[key]
        running = self.running
        if running is None or (running.kind, running.ref) != (kind, ref):
            self._add(MemoryJob(kind, ref))  # else the running round answers this one too
        waiting = self.awaited.setdefault(key, _Awaited())
        waiting.waiters += 1
        seen = waiting.rounds
        try:
            await workflow.wait_condition(lambda: waiting.rounds > seen)
            return waiting.outcome
        finally:
            waiting.waiters -= 1
            if waiting.waiters == 0:
                del self.awaited[key]

    def _record(self, kind: str, ref: str, outcome: Any, ok: bool) -> None:
        """A round's outcome for the updates waiting on it (and, if it succeeded, for
        repeats later); nothing is kept for a job no update waits for."""
        key = f"{kind}:{ref}"
        waiting = self.awaited.get(key)
        if waiting is not None:
            waiting.rounds += 1
            waiting.outcome = outcome
        if ok:
            self.done.pop(key, None)
            self.done[key] = outcome
            while len(self.done) > KEPT_OUTCOMES:
                del self.done[next(iter(self.done))]

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
                    dataclasses.replace(inp, pending=self.pending, retry_later=self.retry_later)
                )
            if self.pending:
                self.running = self.pending.pop(0)
                try:
                    await self._run_job(inp, self.running)
                finally:
                    self.running = None

    def _update_awaits_queue(self) -> bool:
        """An update (`forget_and_wait`, `correct`) still running waits for its job, which is
        still queued: continue-as-new, which waits for running handlers, would wait for ever
        (and the confirmed forget never run), so the queue runs first."""
        return bool(self.pending) and not workflow.all_handlers_finished()

    async def _run_job(self, inp: MemoryInput, job: MemoryJob) -> None:
        """One round of a job: its activity, retried `activity_attempts` times; a job that
        still fails is answered (if an update waits) and put aside for a later round."""
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=30),
            maximum_attempts=inp.activity_attempts,
        )
        try:
            if job.kind == "extract":
                await workflow.execute_activity_method(
                    MemoryActivities.extract,
                    ExtractInput(inp.user_id, job.ref),
                    start_to_close_timeout=JOB_TIMEOUT,
                    retry_policy=retry,
                )
            elif job.kind == "forget":
                await workflow.execute_activity_method(
                    MemoryActivities.forget,
                    ForgetInput(inp.user_id, job.ref),
                    start_to_close_timeout=JOB_TIMEOUT,
                    retry_policy=retry,
                )
                self._record("forget", job.ref, "forgotten", ok=True)
            else:
                out = await workflow.execute_activity_method(
                    MemoryActivities.correct,
                    CorrectInput(inp.user_id, job.ref),
                    start_to_close_timeout=JOB_TIMEOUT,
                    retry_policy=retry,
                )
                self._record("correct", job.ref, out, ok=True)
        except ActivityError as e:
            self._failed(inp, job, e)

    def _failed(self, inp: MemoryInput, job: MemoryJob, e: ActivityError) -> None:
        cause = e.cause
        final = isinstance(cause, ApplicationError) and cause.non_retryable
        if job.kind == "correct":
            self._record("correct", job.ref, str(cause or e), ok=False)
        if job.kind == "forget":
            # The caller (`forget_and_wait`) is answered now, not after the next round:
            # the card's task waits for this answer, and "not yet" is true, the job
            # runs again later (the card is marked handed, so nothing else resends it).
            self._record("forget", job.ref, f"not yet: {cause or e}", ok=False)
            if final:  # no such card, or not confirmed: no round will change that
                workflow.logger.warning("memory forget %s dropped: %s", job.ref, cause)
                return
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

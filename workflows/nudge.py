"""NudgeWorkflow: one per person (id `nudge:{user_id}`), the clock of their reminders
(docs/architecture.md#nudges).

Each round is one activity that sends what is due as one nudge and answers when the next
is due; the workflow then sleeps on a durable timer until then, or until the person does
something (`touch`). Everything it decides on is in the database, so it carries nothing
across continue-as-new, and a worker restart loses no reminder. While a task of the
person still works it looks again every `check_seconds` (a task that finishes does not
tell it); with nothing watched and nothing working it sleeps until touched, adding no
events at all.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.nudges import NudgeActivities, NudgeRoundInput, NudgeRoundOutcome
    from lomo.contracts import nudge as contract
    from lomo.contracts.nudge import NudgeInput
    from workflows.common import DB_TIMEOUT, RETRY

# A timer never shorter than this: a due time a hair ahead of the database's clock is
# looked at again a moment later, not in a busy loop.
SHORTEST_WAIT = 0.05


def next_wait(r: NudgeRoundOutcome, check_seconds: float) -> float | None:
    """Seconds to sleep after a round; None: until touched."""
    waits = [w for w in (r.next_in_seconds, check_seconds if r.working else None) if w is not None]
    return max(min(waits), SHORTEST_WAIT) if waits else None


@workflow.defn(name=contract.WORKFLOW)
class NudgeWorkflow:
    def __init__(self) -> None:
        self.touched = False

    @workflow.signal(name=contract.TOUCH)
    def touch(self) -> None:
        self.touched = True

    @workflow.run
    async def run(self, inp: NudgeInput) -> None:
        # A bounded loop, then continue-as-new: the history stays a few events per round.
        for _ in range(inp.rounds):
            self.touched = False  # a touch during the round makes the next one run at once
            r = await workflow.execute_activity_method(
                NudgeActivities.nudge_round,
                NudgeRoundInput(inp.user_id),
                start_to_close_timeout=DB_TIMEOUT,
                retry_policy=RETRY,
            )
            wait = next_wait(r, inp.check_seconds)
            try:
                await workflow.wait_condition(
                    lambda: self.touched,
                    timeout=timedelta(seconds=wait) if wait is not None else None,
                )
            except TimeoutError:
                pass
            if workflow.info().is_continue_as_new_suggested():
                break
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(inp)

"""What every workflow here shares: the retry and timeout of short DB activities, the
back-off of waits for a wake-up that may have been lost, and the re-read of a card."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.runtime import RuntimeActivities
    from activities.types import CardRef
    from lomo.states import CardStatus

DB_TIMEOUT = timedelta(seconds=30)
RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))


def backoff(first_seconds: float, cap_seconds: float, waited: int) -> timedelta:
    """The wait after `waited` earlier ones: it doubles from `first_seconds` up to
    `cap_seconds`. A job or card left waiting then costs its history a few events per
    doubling instead of a dozen per wait, while a lost wake-up is still found."""
    seconds = first_seconds * 2 ** min(waited, 32)
    return timedelta(seconds=max(first_seconds, min(seconds, cap_seconds)))


async def card_unanswered(card_id: str) -> bool:
    """Ask the DB (an activity) whether the card is still unanswered: the signal that
    would have said so may have been lost while no worker ran."""
    st = await workflow.execute_activity_method(
        RuntimeActivities.card_state,
        CardRef(card_id),
        start_to_close_timeout=DB_TIMEOUT,
        retry_policy=RETRY,
    )
    return st.status == CardStatus.OPEN

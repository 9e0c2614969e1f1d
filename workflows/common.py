"""What every workflow here shares: the retry and timeout of short DB activities, and the
re-read of a card whose wake-up may have been lost."""

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

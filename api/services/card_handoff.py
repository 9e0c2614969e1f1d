"""Handing an answered card on to Temporal: its kind's after-commit effect (clarify → the
person's main thread, forget → the memory cascade, delete → purging the bytes), then the
wake-up of its task and of its flow run; and the record that all of them went through
(`cards.handed_at`), which the relay (`api/services/relay.py`) reads. No HTTP here: the card route
and the relay call these.

The answer is committed first, so a hand-off that times out or fails (Temporal restarting,
no worker to take an update, the api killed) loses nothing: the card stays unmarked and
the relay sends its hand-offs again. Each one is idempotent on repeat: the main thread's
queue holds an id once and its routing activity flags a repeated plan (a clarify answer is
routed once); a forget whose cascade ran is not signalled again (`card_effects`), and the
cascade itself is keyed by the card; a task's and a flow run's `card_answered` add to a set
(a task that already took the card refuses the update, which is ignored); purging a deleted
object's bytes finds nothing the second time.
"""

from __future__ import annotations

from sqlalchemy import update

from api.dispatch.flows import flow_card_answered
from api.dispatch.nudges import touch_nudges
from api.dispatch.tasks import card_answered
from api.services.card_effects import EFFECTS, HandoffState
from api.services.handoff import within_bound
from lomo import clock
from lomo.db.engine import Database
from lomo.db.models import Card


async def hand_on(state: HandoffState, card: Card) -> None:
    """All of the answer's hand-offs, in order (the effect first: a confirmed forget runs
    before the card's task wakes), then the record. Raises if one did not go through."""
    effect = EFFECTS.get(card.kind)
    if effect and effect.after_commit:
        await effect.after_commit(state, card)
    client = await state.temporal()
    if card.task_id:
        await card_answered(client, card.task_id, card.id)
    await flow_card_answered(client, card)
    await touch_nudges(client, state.settings, card.user_id)
    await mark_card_handed(state.db, card.id)


async def hand_on_bounded(state: HandoffState, card: Card) -> bool:
    """The request's hand-off: at most `handoff_wait_seconds`. The answer is stored,
    so a hand-off that times out or fails is left to the relay and the request still
    answers with the card; a 500 here would tell the person their answer was lost when it
    was not. Returns whether everything went through."""
    return await within_bound(
        hand_on(state, card), f"card {card.id}", state.settings.handoff_wait_seconds
    )


async def mark_card_handed(db: Database, card_id: str) -> None:
    async with db.session() as s:
        await s.execute(
            update(Card)
            .where(Card.id == card_id, Card.handed_at.is_(None))
            .values(handed_at=clock.now())
        )

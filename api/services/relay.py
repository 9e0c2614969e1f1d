"""The hand-off relay: stored messages that never reached Temporal are handed over.

Accepting a message commits it first and hands it to Temporal second. When the second
step fails (Temporal restarting, the api killed in between, a client that gave up after a
500 and never resent), the message is stored and nobody knows of it. Each api process
looks every `handoff_relay_seconds` for messages older than that with no `handed_at` and
hands them over; a hand-off is idempotent (the main thread's queue and a task's inbox hold
an id once, the routing activity flags a repeated plan), so two api replicas relaying the
same message, or a relay racing the request's own late hand-off, change nothing twice.

Answered cards the same way: answering commits first, then hands the answer on (its
effect, e.g. a forget cascade or a clarify routing, and its task's and flow run's wake-up;
`api/services/card_handoff.py`, each idempotent). A card answered longer ago than the relay period
with no `handed_at` gets its hand-offs again.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from sqlalchemy import select
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from api.dispatch import TemporalGetter
from api.services.card_effects import HandoffState
from api.services.card_handoff import hand_on
from api.services.handoff import TIMED_OUT, arrived, hand_over_stored, mark_handed
from lomo import clock
from lomo.db.engine import Database
from lomo.db.models import Card, MessageRow
from lomo.settings import Settings
from lomo.states import CardStatus
from workspace.blobs import make_asset_store
from workspace.store import BlobStore

log = logging.getLogger(__name__)
BATCH = 100


def _temporal_down(e: BaseException) -> bool:
    """Temporal unreachable: every later hand-off of the round would fail the same way.
    Any other failure is this item's own (a failing effect, a refusal): skipped this round,
    it must not hold up the items behind it round after round."""
    return isinstance(e, RPCError) and e.status in (
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
    )


async def relay_once(
    db: Database, temporal: Client, settings: Settings, assets: BlobStore | None = None
) -> int:
    """Hand over what a failed hand-off left behind (stored messages, answered cards);
    returns how many were handed over. `assets`: the api's blob store (a delete card's
    effect purges bytes); by default the one the settings name."""
    return await _relay_messages(db, temporal, settings) + await _relay_cards(
        db, temporal, settings, assets or make_asset_store(settings)
    )


async def _relay_messages(db: Database, temporal: Client, settings: Settings) -> int:
    cutoff = clock.now() - timedelta(seconds=settings.handoff_relay_seconds)
    async with db.session() as s:
        stranded = list(
            await s.scalars(
                select(MessageRow)
                .where(MessageRow.handed_at.is_(None), MessageRow.created_at < cutoff)
                .order_by(MessageRow.created_at)
                .limit(BATCH)
            )
        )
    done = 0
    for m in stranded:
        if arrived(m):
            # It reached Temporal (routed, or read by its task) and only the mark is
            # missing: handing it over again could make its task read it twice.
            await mark_handed(db, m.id)
            continue
        try:
            await asyncio.wait_for(
                hand_over_stored(db, temporal, settings, m), settings.handoff_wait_seconds
            )
            done += 1
        except TIMED_OUT:
            # Temporal answers but the message's task does not take it (no worker polls its
            # queue yet): the others are not held up behind it; next round it is tried again.
            log.warning("relay: message %s not handed over yet (timed out)", m.id)
        except Exception as e:
            log.warning("relay: message %s not handed over yet: %r", m.id, e)
            if _temporal_down(e):
                break  # the next round tries again; the others would wait for it too
    if done:
        log.info("relay: handed over %d stored message(s)", done)
    return done


async def _relay_cards(
    db: Database, temporal: Client, settings: Settings, assets: BlobStore
) -> int:
    # A request still inside its own bounded hand-off may race the relay when the relay
    # period is shorter than `handoff_wait_seconds`: harmless, each hand-off being
    # idempotent (the defaults are equal).
    cutoff = clock.now() - timedelta(seconds=settings.handoff_relay_seconds)
    async with db.session() as s:
        stranded = list(
            await s.scalars(
                select(Card)
                .where(
                    Card.status == CardStatus.ANSWERED,
                    Card.handed_at.is_(None),
                    Card.answered_at < cutoff,
                )
                .order_by(Card.answered_at)
                .limit(BATCH)
            )
        )

    async def client() -> Client:
        return temporal

    state = HandoffState(db, settings, assets, client)
    done = 0
    for card in stranded:
        try:
            await asyncio.wait_for(hand_on(state, card), settings.handoff_wait_seconds)
            done += 1
        except TIMED_OUT:
            # Temporal answers but this card's workflow does not take it (no worker yet, a
            # stuck task): the others are not held up behind it; next round it is tried again.
            log.warning("relay: card %s not handed on yet (timed out)", card.id)
        except Exception as e:
            log.warning("relay: card %s not handed on yet: %r", card.id, e)
            if _temporal_down(e):
                break  # the next round tries again; the others would wait for it too
    if done:
        log.info("relay: handed on %d answered card(s)", done)
    return done


async def relay_loop(
    db: Database, temporal: TemporalGetter, settings: Settings, assets: BlobStore | None = None
) -> None:
    """Every `handoff_relay_seconds`, one round; `temporal` connects on first use."""
    while True:
        await asyncio.sleep(settings.handoff_relay_seconds)
        try:
            await relay_once(db, await temporal(), settings, assets)
        except Exception as e:  # the DB or Temporal unreachable: next round
            log.warning("relay round failed: %r", e)

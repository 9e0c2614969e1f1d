"""The hand-off relay: stored messages that never reached Temporal are handed over.

Accepting a message commits it first and hands it to Temporal second. When the second
step fails (Temporal restarting, the api killed in between, a client that gave up after a
500 and never resent), the message is stored and nobody knows of it. Each api process
looks every `handoff_relay_seconds` for messages older than that with no `handed_at` and
hands them over; a hand-off is idempotent (the main thread's queue and a task's inbox hold
an id once, the routing activity flags a repeated plan), so two api replicas relaying the
same message, or a relay racing the request's own late hand-off, change nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from sqlalchemy import select

from api.handoff import arrived, hand_over_stored, mark_handed
from lomo import clock
from lomo.db.engine import Database
from lomo.db.models import MessageRow
from lomo.settings import Settings

log = logging.getLogger(__name__)
BATCH = 100


async def relay_once(db: Database, temporal: Any, settings: Settings) -> int:
    """Hand over what a failed hand-off left behind; returns how many were handed over."""
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
            await hand_over_stored(db, temporal, settings, m)
            done += 1
        except Exception as e:  # Temporal still down: the next round tries again
            log.warning("relay: message %s not handed over yet: %r", m.id, e)
            break
    if done:
        log.info("relay: handed over %d stored message(s)", done)
    return done


async def relay_loop(db: Database, temporal: Any, settings: Settings) -> None:
    """`temporal` is the api's lazy client getter (connects on first use)."""
    while True:
        await asyncio.sleep(settings.handoff_relay_seconds)
        try:
            await relay_once(db, await temporal(), settings)
        except Exception as e:  # the DB or Temporal unreachable: next round
            log.warning("relay round failed: %r", e)

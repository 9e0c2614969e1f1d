"""The person's event stream as server-sent events, read from the DB's event log (so an
api restart loses nothing) and woken by the bell when a commit on this host adds one."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

from lomo.db.engine import Database
from lomo.events import BELL, events_after

KEEPALIVE_SECONDS = 15.0  # between comment lines that keep proxies from closing the stream


async def event_stream(
    db: Database, user_id: str, after: int, poll: float, once: bool
) -> AsyncIterator[str]:
    """SSE frames of the events after `after`; `once`: what exists, then the end."""
    keepalive_every = max(1, round(KEEPALIVE_SECONDS / poll))
    seq, idle = after, 0
    while True:
        bell = BELL.waiter(user_id)
        try:
            async with db.session() as s:
                rows = await events_after(s, user_id, seq)
            for e in rows:
                seq = e.seq
                payload = {
                    "seq": e.seq,
                    "type": e.type,
                    "data": e.data,
                    "at": e.created_at.isoformat(),
                }
                yield f"id: {e.seq}\nevent: {e.type}\ndata: {json.dumps(payload)}\n\n"
            if once and not rows:
                return
            if not rows:
                idle += 1
                if idle % keepalive_every == 0:
                    yield ": keepalive\n\n"
                # Woken at once by a commit on this host (this process, or another through
                # lomo/bell_relay.py); the poll finds what a wake-up missed.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(bell.wait(), poll)
        finally:
            BELL.forget(user_id, bell)

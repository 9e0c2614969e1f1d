"""Heartbeats for long activity bodies: a dead worker's call is retried after the heartbeat
timeout instead of the whole start-to-close timeout (the heartbeat is Temporal's lease)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    # Outside an activity (an activity's body called directly, as in tests) nobody holds
    # a lease: nothing to beat.
    timeout = activity.info().heartbeat_timeout if activity.in_activity() else None
    if not timeout:
        yield
        return
    interval = max(0.1, timeout.total_seconds() / 3)

    async def beat() -> None:
        # The first beat after one interval, not at once: the server's heartbeat timeout
        # runs from the attempt's start anyway, and a call that ends sooner (most tools, a
        # cached or fast model) then costs the server no heartbeat write.
        while True:
            await asyncio.sleep(interval)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

"""The turn's `running` status, shown while the model thinks or stored with its decision.

The workflow asks a turn's first model step to write `running`. Committing it before the
model is asked would put a transaction on the path of every turn for a status a fast answer
replaces within milliseconds; so the step asks the model at once, and the status is:

- written on its own after `delay` seconds, while a slow model still thinks (the person
  sees the task working);
- or, when the model answered first, committed with the decision (`StepRecord.running`),
  ahead of the reply's event.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from journal.store import StepStore
from journal.types import StatusChange


class ShowRunning:
    """Writes `change` after `delay` seconds unless `settle` comes first."""

    def __init__(
        self, store: StepStore, change: StatusChange | None, at: datetime, delay: float
    ) -> None:
        self._writing = False
        self._task = (
            asyncio.ensure_future(self._later(store, change, at, delay)) if change else None
        )

    async def _later(
        self, store: StepStore, change: StatusChange, at: datetime, delay: float
    ) -> None:
        await asyncio.sleep(delay)
        self._writing = True
        await store.write_status(change, at)

    def cancel(self) -> None:
        """The step failed: nothing more is written (a write in flight is rolled back)."""
        if self._task is not None:
            self._task.cancel()

    async def settle(self) -> bool:
        """Whether the status is still to be written, with the decision. A write already
        under way is waited for (its error is the step's)."""
        if self._task is None:
            return False
        if not self._writing:
            # Still asleep (this loop runs one thing at a time): it ends at that await.
            self._task.cancel()
            await asyncio.wait([self._task])
            return True
        await self._task
        return False

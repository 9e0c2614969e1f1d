"""The turn's `running` status: written while the model thinks, or with its decision.

A model step used to commit `running` (and its event) before asking the model: a commit
that waits for its WAL flush on the path of every turn, for a status a fast answer
replaces within milliseconds (issue 14). Now the step asks the model at once and:

- if the model is still thinking after `running_event_seconds`, a session of its own
  writes the status, while the model thinks (off the step's path);
- if it answered first, the status goes into the transaction that stores the decision,
  ahead of the reply's event: the person's stream still reads `running` before the reply,
  and the turn commits once.

The status is guarded by the task's turn as before (`only_before_turn`): a retried step
whose decision is stored writes nothing.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from sqlalchemy import bindparam, update
from sqlalchemy.ext.asyncio import AsyncSession

from activities.types import StatusInput
from journal.statements import status_batch, write_status
from lomo.db.engine import Database
from lomo.db.hot import Bound, HotQuery
from lomo.db.models import Task
from lomo.events import ring_on_commit

# A kind the workflow holds for a task whose stored status already said `running` (the
# status write then changes nothing, and `write_status` would set the kind by itself).
_KIND = HotQuery(
    update(Task.__table__)  # type: ignore[arg-type]
    .where(Task.__table__.c.id == bindparam("p_id"), Task.__table__.c.kind != bindparam("p_kind"))
    .values(kind=bindparam("p_kind"))
)


class ShowLater:
    """Writes `status` after `delay` seconds unless `settle` comes first."""

    def __init__(self, db: Database, status: StatusInput, at: datetime, delay: float) -> None:
        self.status, self.at = status, at
        self._writing = False
        self._task = asyncio.ensure_future(self._run(db, delay))

    async def _run(self, db: Database, delay: float) -> None:
        await asyncio.sleep(delay)
        self._writing = True
        async with db.session() as s:
            await write_status(s, self.status, self.at)

    def cancel(self) -> None:
        """The step failed: nothing more is written (a write in flight is rolled back)."""
        self._task.cancel()

    async def settle(self) -> bool:
        """Whether the status is still to be written, with the decision. A write already
        under way is waited for (its error is the step's)."""
        if not self._writing:
            # Still asleep (this loop runs one thing at a time): it ends at that await.
            self._task.cancel()
            await asyncio.wait([self._task])
            return True
        await self._task
        return False


def running_batch(s: AsyncSession, status: StatusInput, at: datetime) -> list[Bound]:
    """The status's statements to lead the decision's batch, where they are one round trip
    (Postgres): the UPDATE with its event, and the kind should the status be unchanged.
    Nothing elsewhere (`write_running` writes it before the batch)."""
    lead = status_batch(s, status, at)
    if lead and status.kind:
        lead.append(_KIND.bind(p_id=status.task_id, p_kind=status.kind))
    return lead


async def write_running(
    s: AsyncSession, status: StatusInput, at: datetime, lead: list[Bound]
) -> None:
    """With `lead` (sent with the batch): the bell for its event, should it have changed.
    Without: the status written now (SQLite), before the batch's own events."""
    if not lead:
        await write_status(s, status, at)
        return
    changed = await lead[0].rows(s)  # answered from the batch
    if changed:
        ring_on_commit(s, changed[0][0])

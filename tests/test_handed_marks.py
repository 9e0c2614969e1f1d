"""The request path's `handed_at` marks are written after the response, a burst of them in
one UPDATE (the accept's second write transaction left its latency)."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import event, select

from api.services.handoff import MARKS
from lomo.db.engine import Database
from lomo.db.models import MessageRow
from lomo.ids import new_id
from tests.helpers import eventually
from tests.runtime_support import new_user


async def test_a_burst_of_marks_shares_updates_and_marks_every_message(db: Database) -> None:
    user = await new_user(db)
    ids = [new_id("msg") for _ in range(30)]
    async with db.session() as s:
        s.add_all(MessageRow(id=i, user_id=user, text="hi") for i in ids)
    updates: list[str] = []

    def count(_c: Any, _cur: Any, stmt: str, *_: Any) -> None:
        if stmt.lstrip().upper().startswith("UPDATE MESSAGES"):
            updates.append(stmt)

    event.listen(db.engine.sync_engine, "before_cursor_execute", count)
    try:

        async def accept(i: str) -> None:
            await asyncio.sleep(0)  # the requests of a burst interleave
            MARKS.add(db, i)

        await asyncio.gather(*(accept(i) for i in ids))

        async def all_marked() -> bool:
            async with db.session() as s:
                rows = await s.scalars(select(MessageRow.handed_at).where(MessageRow.id.in_(ids)))
                return all(r is not None for r in rows)

        await eventually(all_marked, within=10)
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", count)
    assert 1 <= len(updates) <= 2  # the first id alone at most, then the rest together

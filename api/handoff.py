"""Handing a stored message to Temporal: to its task (an explicit target) or to the
person's main thread, plus memory extraction; and the record that Temporal took it
(`messages.handed_at`), which the relay (`api/relay.py`) reads. No HTTP here: the
message routes and the relay call these."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import update

from api.dispatch import deliver_to_task, route_via_main
from api.memory_dispatch import request_extraction
from lomo import clock
from lomo.db.models import MessageRow
from lomo.errors import Conflict
from lomo.telemetry import MESSAGES_ROUTED


async def hand_over_stored(db: Any, temporal: Any, settings: Any, m: MessageRow) -> None:
    """Hand a stored message over (again) and record that Temporal took it. A direct
    message whose task is no longer running goes to the main thread, which starts the
    task again in place (as accept does for a finished task)."""
    direct = _direct_task(m)
    try:
        await hand_over(temporal, settings, m.user_id, m.id, direct)
    except Conflict:
        if direct is None:
            raise
        await hand_over(temporal, settings, m.user_id, m.id, None)
    await mark_handed(db, m.id)


async def mark_handed(db: Any, message_id: str) -> None:
    async with db.session() as s:
        await s.execute(
            update(MessageRow)
            .where(MessageRow.id == message_id, MessageRow.handed_at.is_(None))
            .values(handed_at=clock.now())
        )


def _direct_task(m: MessageRow) -> str | None:
    """The task the api delivered the message to itself (not through the main thread)."""
    return m.task_id if m.deterministic and m.routing_status == "routed" else None


def arrived(m: MessageRow) -> bool:
    """Visibly past the hand-off: routed by the main thread, or read by its task. A direct
    message is "routed" from the start, so only its task having read it counts."""
    if _direct_task(m) is not None:
        return m.processed_turn is not None
    return m.routing_status != "pending"


async def hand_over(
    temporal: Any, settings: Any, user_id: str, message_id: str, direct_task: str | None
) -> None:
    """To the task itself (an explicit target) or to the main thread. Repeating it is
    harmless: the task's inbox and the main thread's queue hold an id once, a task takes an
    id it already read without reading it again (and without a 409), the routing activity
    returns a recorded plan, or one for a message its ended task read, flagged as a repeat
    (nothing handed over twice), and extraction skips a message it already read."""
    # Memory extraction runs beside the task, in the person's MemoryWorkflow; the two
    # hand-offs are independent, so they go to Temporal at once (one round trip of wait).
    extraction = asyncio.create_task(request_extraction(temporal, settings, user_id, message_id))
    try:
        if direct_task:
            await deliver_to_task(temporal, direct_task, message_id)
            MESSAGES_ROUTED.labels("deterministic").inc()
        else:
            await route_via_main(temporal, settings, user_id, message_id)
    finally:
        await extraction

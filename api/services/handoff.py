"""Handing a stored message to Temporal: to its task (an explicit target) or to the
person's main thread, plus memory extraction; and the record that Temporal took it
(`messages.handed_at`), which the relay (`api/services/relay.py`) reads. Message
acceptance (`api/services/messages.py`) and the relay call these.

The message is committed first, so a hand-off that times out or fails (no worker to take
a task's `message` update, the dev server restarting while the client retries) loses
nothing: the request waits at most `handoff_wait_seconds` and answers with the stored
message, and the relay hands it over later (each hand-off is idempotent, see `hand_over`).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable

from sqlalchemy import update
from temporalio.client import Client, RPCTimeoutOrCancelledError

from api.dispatch import TemporalGetter
from api.dispatch.memory import request_extraction
from api.dispatch.nudges import touch_nudges
from api.dispatch.tasks import deliver_to_task, route_via_main
from lomo import clock
from lomo.db.engine import Database
from lomo.db.models import MessageRow
from lomo.errors import Conflict
from lomo.events import append_event
from lomo.settings import Settings
from lomo.states import EventType, RoutingStatus
from lomo.telemetry import MESSAGES_ROUTED

log = logging.getLogger(__name__)


async def hand_over_stored(
    db: Database, temporal: Client, settings: Settings, m: MessageRow
) -> None:
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


async def mark_handed(db: Database, *message_ids: str) -> None:
    """The mark, and for a message its task took itself (a direct one) the event that
    its task has it (`message.delivered`; the web app's "received" mark)."""
    async with db.session() as s:
        got = await s.execute(
            update(MessageRow)
            .where(MessageRow.id.in_(message_ids), MessageRow.handed_at.is_(None))
            .values(handed_at=clock.now())
            .returning(
                MessageRow.id,
                MessageRow.user_id,
                MessageRow.task_id,
                MessageRow.deterministic & (MessageRow.routing_status == RoutingStatus.ROUTED),
            )
            .execution_options(synchronize_session=False)
        )
        delivered = [(m, u, t) for m, u, t, direct in sorted(got.all()) if direct and t]
    if not delivered:
        return
    # Their own transaction: the rows' locks are gone before the person's event counter
    # is waited for, so a burst of marks never holds messages a step's commit must mark.
    async with db.session() as s:
        for mid, user_id, task_id in delivered:
            data = {"message_id": mid, "task_id": task_id}
            await append_event(s, user_id, EventType.MESSAGE_DELIVERED, data)


class _Marks:
    """The request path's `handed_at` marks, written after the response, many per UPDATE.

    The mark only tells the relay what it may skip: written late, or lost with the process,
    it costs one more idempotent hand-off by the relay, never a message. Writing it inside
    the request cost each accept a second write transaction (on SQLite a second turn for
    the one writer) in its latency; batched, a burst of accepts shares one."""

    def __init__(self) -> None:
        self._pending: weakref.WeakKeyDictionary[Database, set[str]] = weakref.WeakKeyDictionary()
        self._writer: weakref.WeakKeyDictionary[Database, asyncio.Task[None]] = (
            weakref.WeakKeyDictionary()
        )

    def add(self, db: Database, message_id: str) -> None:
        self._pending.setdefault(db, set()).add(message_id)
        writer = self._writer.get(db)
        loop = asyncio.get_running_loop()
        if writer is None or writer.done() or writer.get_loop() is not loop:
            self._writer[db] = loop.create_task(self._write(db))

    async def _write(self, db: Database) -> None:
        # Ids added while an UPDATE runs wait for the next one: under load they pile up
        # and go together. Ends without an await once nothing is pending, so an `add`
        # never meets a writer that has stopped taking ids but is not done yet.
        while ids := self._pending.pop(db, None):
            try:
                await mark_handed(db, *sorted(ids))
            except Exception:
                log.warning("%d handed marks not written; the relay writes them", len(ids))


MARKS = _Marks()


def _direct_task(m: MessageRow) -> str | None:
    """The task the api delivered the message to itself (not through the main thread)."""
    return m.task_id if m.deterministic and m.routing_status == RoutingStatus.ROUTED else None


def arrived(m: MessageRow) -> bool:
    """Visibly past the hand-off: routed by the main thread, or read by its task. A direct
    message is "routed" from the start, so only its task having read it counts. A message
    the person withdrew or moved away is not handed over (again)."""
    if m.withdrawn_at is not None or m.moved_to is not None:
        return True
    if _direct_task(m) is not None:
        return m.processed_turn is not None
    return m.routing_status != RoutingStatus.PENDING


async def hand_over(
    temporal: Client, settings: Settings, user_id: str, message_id: str, direct_task: str | None
) -> None:
    """To the task itself (an explicit target) or to the main thread. Repeating it is
    harmless: the task's inbox and the main thread's queue hold an id once, a task takes an
    id it already read without reading it again (and without a 409), the routing activity
    returns a recorded plan, or one for a message its ended task read, flagged as a repeat
    (nothing handed over twice), and extraction skips a message it already read."""

    async def to_task_or_main() -> None:
        if direct_task:
            await deliver_to_task(temporal, direct_task, message_id)
            MESSAGES_ROUTED.labels("deterministic").inc()
        else:
            await route_via_main(temporal, settings, user_id, message_id)

    # Memory extraction runs beside the task, in the person's MemoryWorkflow; the two
    # hand-offs are independent, so they go to Temporal at once (one round trip of wait).
    # Both run to the end before an error is raised (the task's first: a 409 stays a
    # 409), and cancelling this (the caller's time bound) cancels both: neither outlives
    # the request nor holds it past its bound.
    results = await asyncio.gather(
        to_task_or_main(),
        request_extraction(temporal, settings, user_id, message_id),
        # The person spoke: their reminders look again (an answer resets the back-off).
        touch_nudges(temporal, settings, user_id),
        return_exceptions=True,
    )
    for r in results:
        if isinstance(r, BaseException):
            raise r


async def hand_over_bounded(
    db: Database,
    temporal: TemporalGetter,
    settings: Settings,
    m: MessageRow,
    *,
    first: bool,
) -> bool:
    """The request's hand-off of its stored message: at most `handoff_wait_seconds`,
    Temporal's client included (`temporal` connects on first use, so the message is stored
    even while Temporal is down). A timeout or a failure (Temporal unreachable, no worker
    taking the task's update) is logged and left to the relay: the message is stored, and
    a 500 would tell the person it was lost when it is not. A 409 (the task refused the
    message, or its workflow ended) is raised as before. `first`: the message was just
    stored (its direct task is tried and a refusal is the answer); else it is a client's
    retry, handed over as the relay does. Returns whether Temporal took it."""

    async def go() -> None:
        client = await temporal()
        if first:
            await hand_over(client, settings, m.user_id, m.id, _direct_task(m))
            MARKS.add(db, m.id)
        else:
            await hand_over_stored(db, client, settings, m)

    return await within_bound(go(), f"message {m.id}", settings.handoff_wait_seconds)


# A hand-off past its bound. The Temporal client reports an update cancelled by that bound
# as its own error (RPCTimeoutOrCancelledError), not as a cancellation, so `wait_for`
# raises that instead of TimeoutError.
TIMED_OUT = (TimeoutError, RPCTimeoutOrCancelledError)


async def within_bound(work: Awaitable[None], what: str, seconds: float) -> bool:
    """A request's hand-off of what it already stored, at most `seconds`: a timeout or a
    failure is logged and left to the relay (a 500 would say it was lost when it is not);
    a 409 (Conflict) is raised. Returns whether it went through."""
    try:
        await asyncio.wait_for(work, seconds)
    except Conflict:
        raise
    except TIMED_OUT:
        log.warning("%s: hand-off still waiting after %ss; the relay finishes it", what, seconds)
        return False
    except Exception:
        log.warning("%s: hand-off failed; the relay finishes it", what, exc_info=True)
        return False
    return True

"""Accepting a person's message: check it, store it with its routing (an explicit target,
a task, a card or an object of one task, is settled here without a model call), then hand
it to Temporal within a bound (`api/services/handoff.py`). Reading one back."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from api.dispatch import TemporalGetter
from api.schemas.messages import MessageAccepted, MessageIn, MessageList, MessageView, Routing
from api.services.handoff import arrived, hand_over_bounded
from journal.moves import is_notice
from lomo.db.engine import Database
from lomo.db.models import MessageRow, User
from lomo.errors import Conflict, NotFound, TooLarge
from lomo.events import append_event
from lomo.ids import new_id
from lomo.settings import Settings
from lomo.states import RoutingStatus
from routing.deterministic import resolve_target
from routing.policy import confirm_paid_calls
from tasks.lifecycle import own_task
from workspace.store import get_object, link_task


async def accept_message(
    db: Database,
    temporal: TemporalGetter,
    settings: Settings,
    user: User,
    body: MessageIn,
    channel: str,
    raced: bool = False,
) -> MessageAccepted:
    """Store the message, then hand it to Temporal within `handoff_wait_seconds`.
    `temporal` is called only after the message is stored: a Temporal that is down does
    not refuse it."""
    if len(body.text) > settings.max_message_chars:
        raise TooLarge(
            f"the text has {len(body.text)} characters; the limit is {settings.max_message_chars}",
            limit_chars=settings.max_message_chars,
        )
    async with db.session() as s:
        old = await _same_client_message(s, user.id, body.client_message_id)
        msg = old or await store_message(s, user.id, body, channel)
    if msg is None:  # a concurrent duplicate won the race: answer as for a retry
        if raced:  # the winner is not found by its client id: never loop on it
            raise Conflict("a message with this client_message_id could not be stored")
        return await accept_message(db, temporal, settings, user, body, channel, raced=True)
    if old is not None:
        # The same client message again stores nothing new, but unless it has visibly
        # arrived it is handed over again: the first attempt may have stored it and then
        # not reached Temporal (the api died, its bounded hand-off timed out or failed, or
        # the client gave up waiting), and a 202 must mean the message is on its way. Both
        # hand-offs are idempotent.
        if not arrived(old):
            await hand_over_bounded(db, temporal, settings, old, first=False)
        return MessageAccepted(message_id=old.id, routing=routing_view(old))
    # Persisted first (evidence), handed over second, within a bound: a crash in between,
    # or a hand-off that timed out or failed (no worker takes the task's update, Temporal
    # restarting), leaves a stored message that the client's retry with the same
    # client_message_id hands over, or, when no retry comes, the relay.
    await hand_over_bounded(db, temporal, settings, msg, first=True)
    return MessageAccepted(message_id=msg.id, routing=routing_view(msg))


async def store_message(
    s: AsyncSession,
    user_id: str,
    body: MessageIn,
    channel: str,
    moved_from: str | None = None,
    message_id: str | None = None,
) -> MessageRow | None:
    """The message with its routing, its events and links; None if a concurrent request
    with the same client_message_id stored it first. `moved_from`: the message this one
    is a move of (api/services/corrections.py), with the id it was given (`message_id`)."""
    # Explicit targets are settled here, after checking the task can take the message.
    target = await resolve_target(s, user_id, body.task_id, body.card_id, body.object_id)
    task_id = target.task_id
    # Everything the message points at must be the person's, with or without a task:
    # another person's object is 404 and nothing is kept.
    objects = list(dict.fromkeys(o for o in (body.object_id, *body.attachments) if o))
    for oid in objects:
        await get_object(s, user_id, oid)
    # A finished task (e.g. a completed lightweight one) is started again in place by the
    # main thread; the routing is still deterministic.
    direct = task_id is not None and not target.restart
    msg = MessageRow(
        id=message_id or new_id("msg"),
        user_id=user_id,
        text=body.text,
        client_message_id=body.client_message_id,
        target=body.model_dump(exclude={"text", "client_message_id"}, exclude_none=True),
        routing_status=RoutingStatus.ROUTED if direct else RoutingStatus.PENDING,
        deterministic=task_id is not None,
        decision="existing" if task_id else None,
        task_id=task_id,
        channel=channel,
        moved_from=moved_from,
    )
    s.add(msg)
    try:
        await s.flush()
    except IntegrityError:
        await s.rollback()
        return None
    await _record(s, msg, objects, direct)
    return msg


async def _record(s: AsyncSession, msg: MessageRow, objects: list[str], direct: bool) -> None:
    """The stored message's events, and what it changes about its task."""
    await append_event(s, msg.user_id, "message.received", {"message_id": msg.id})
    if msg.task_id:
        await confirm_paid_calls(s, msg, msg.task_id)
        # The task references what the message points at (change notices follow).
        for oid in objects:
            await link_task(s, msg.task_id, oid)
    if direct:
        await append_event(
            s,
            msg.user_id,
            "message.routed",
            {"message_id": msg.id, "task_id": msg.task_id, "deterministic": True},
        )


async def _same_client_message(
    s: AsyncSession, user_id: str, client_id: str | None
) -> MessageRow | None:
    if not client_id:
        return None
    row: MessageRow | None = await s.scalar(
        select(MessageRow).where(
            MessageRow.user_id == user_id, MessageRow.client_message_id == client_id
        )
    )
    return row


async def get_message(s: AsyncSession, user_id: str, message_id: str) -> MessageView:
    m = await s.get(MessageRow, message_id)
    if m is None or m.user_id != user_id:
        raise NotFound(f"no message {message_id}")
    return message_view(m, await copies_of(s, [m]))


async def task_messages(s: AsyncSession, user_id: str, task_id: str, limit: int) -> MessageList:
    await own_task(s, user_id, task_id)
    rows = list(
        await s.scalars(
            select(MessageRow)
            .where(MessageRow.task_id == task_id, MessageRow.user_id == user_id)
            .order_by(MessageRow.created_at.desc(), MessageRow.id.desc())
            .limit(limit)
        )
    )
    said = [m for m in reversed(rows) if not is_notice(m)]
    copies = await copies_of(s, said)
    return MessageList(messages=[message_view(m, copies) for m in said])


async def copies_of(s: AsyncSession, rows: list[MessageRow]) -> dict[str, str | None]:
    """The task of each moved message's copy, by the copy's id."""
    ids = [m.moved_to for m in rows if m.moved_to]
    if not ids:
        return {}
    got = await s.execute(select(MessageRow.id, MessageRow.task_id).where(MessageRow.id.in_(ids)))
    return {str(i): t for i, t in got.all()}


def routing_view(m: MessageRow) -> Routing:
    routing: dict[str, Any] = {"status": m.routing_status, "deterministic": m.deterministic}
    if m.decision:
        routing["decision"] = m.decision
    if m.task_id:
        routing["task_id"] = m.task_id
    return Routing.model_validate(routing)


def message_state(m: MessageRow) -> str:
    """Where the message stands with its task (docs/api.md, "A message's state")."""
    if m.withdrawn_at is not None:
        return "withdrawn"
    if m.moved_to is not None:
        return "moved"
    if m.read_at is not None or m.processed_turn is not None:
        return "read"
    if m.task_id and m.routing_status == "routed" and (m.handed_at or not m.deterministic):
        # A direct message is its task's once the task's update took it (`handed_at`);
        # one routed by the main thread, once routed (the main thread delivers it).
        return "received"
    return "sent"


def message_view(m: MessageRow, copies: dict[str, str | None] | None = None) -> MessageView:
    out: dict[str, Any] = {
        "message_id": m.id,
        "text": m.text,
        "routing": routing_view(m),
        "state": message_state(m),
    }
    if m.task_id:
        out["task_id"] = m.task_id
    if m.processed_turn is not None:
        out["processed"] = {
            "task_id": m.task_id,
            "turn": m.processed_turn,
            "step": m.processed_step,
        }
    if m.withdrawn_at is not None:
        out["withdrawn"] = True
    if m.moved_to:
        out["moved_to"] = {"message_id": m.moved_to, "task_id": (copies or {}).get(m.moved_to)}
    if m.moved_from:
        out["moved_from"] = m.moved_from
    return MessageView.model_validate(out)

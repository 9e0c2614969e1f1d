from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from temporalio.client import Client

from api.deps import ChannelDep, DbDep, SettingsDep, UserDep
from api.services.handoff import arrived, hand_over_bounded
from lomo.db.models import MessageRow
from lomo.errors import NotFound, TooLarge
from lomo.events import append_event
from lomo.ids import new_id
from money.policy import set_autonomy
from routing.deterministic import resolve_target
from workspace.store import get_object, link_task

router = APIRouter(prefix="/v1", tags=["messages"])


class MessageIn(BaseModel):
    text: str = Field(min_length=1)
    client_message_id: str | None = Field(default=None, max_length=200)
    task_id: str | None = Field(default=None, max_length=40)
    card_id: str | None = Field(default=None, max_length=40)
    object_id: str | None = Field(default=None, max_length=40)
    attachments: list[str] = Field(default_factory=list, max_length=50)


def message_view(m: MessageRow) -> dict[str, Any]:
    routing: dict[str, Any] = {"status": m.routing_status, "deterministic": m.deterministic}
    if m.decision:
        routing["decision"] = m.decision
    if m.task_id:
        routing["task_id"] = m.task_id
    out: dict[str, Any] = {"message_id": m.id, "text": m.text, "routing": routing}
    if m.processed_turn is not None:
        out["processed"] = {
            "task_id": m.task_id,
            "turn": m.processed_turn,
            "step": m.processed_step,
        }
    return out


async def accept_message(
    body: MessageIn,
    user: Any,
    db: Any,
    settings: Any,
    temporal: Callable[[], Awaitable[Client]],
    task_id: str | None,
    channel: str = "app",
) -> tuple[dict[str, Any], int]:
    """Store the message, then hand it to Temporal within `handoff_wait_seconds`.
    `temporal`: the api's client getter, called only after the message is stored (a
    Temporal that is down does not refuse it)."""
    if len(body.text) > settings.max_message_chars:
        raise TooLarge(
            f"the text has {len(body.text)} characters; the limit is {settings.max_message_chars}",
            limit_chars=settings.max_message_chars,
        )
    async with db.session() as s:
        old = await _same_client_message(s, user.id, body.client_message_id)
        if old is None:
            # Explicit targets (task, card, an object of exactly one task) are settled here
            # with no model call, after checking the task can take the message (§3.1).
            target = await resolve_target(s, user.id, task_id, body.card_id, body.object_id)
            task_id = target.task_id
            # Everything the message points at must be the person's, with or without a
            # task: another person's object is 404 and nothing is kept.
            objects = list(dict.fromkeys(o for o in (body.object_id, *body.attachments) if o))
            for oid in objects:
                await get_object(s, user.id, oid)
            # A finished task (e.g. a completed lightweight one) is started again in place
            # by the main thread; the routing is still deterministic.
            direct = task_id is not None and not target.restart
            msg = MessageRow(
                id=new_id("msg"),
                user_id=user.id,
                text=body.text,
                client_message_id=body.client_message_id,
                target=body.model_dump(exclude={"text", "client_message_id"}, exclude_none=True),
                routing_status="routed" if direct else "pending",
                deterministic=task_id is not None,
                decision="existing" if task_id else None,
                task_id=task_id,
                channel=channel,
            )
            s.add(msg)
            try:
                await s.flush()
            except IntegrityError:  # a concurrent duplicate won the race
                await s.rollback()
                return await accept_message(body, user, db, settings, temporal, task_id, channel)
            await append_event(s, user.id, "message.received", {"message_id": msg.id})
            if task_id and channel == "api":
                # A task driven through the open API confirms each paid call (§8.4).
                await set_autonomy(s, user.id, task_id, "ask")
            if task_id:
                # The task references what the message points at (change notices follow).
                for oid in objects:
                    await link_task(s, task_id, oid)
            if direct:
                await append_event(
                    s,
                    user.id,
                    "message.routed",
                    {"message_id": msg.id, "task_id": task_id, "deterministic": True},
                )
    if old is not None:
        # The same client message again stores nothing new, but unless it has visibly
        # arrived it is handed over again: the first attempt may have stored it and then
        # not reached Temporal (the api died, its bounded hand-off timed out or failed, or
        # the client gave up waiting), and a 202 must mean the message is on its way. Both
        # hand-offs are idempotent (see below).
        if not arrived(old):
            await hand_over_bounded(db, temporal, settings, old, first=False)
        return {"message_id": old.id, "routing": message_view(old)["routing"]}, 202
    # Persisted first (evidence), handed over second, within a bound: a crash in between,
    # or a hand-off that timed out or failed (no worker takes the task's update, Temporal
    # restarting), leaves a stored message that the client's retry with the same
    # client_message_id hands over, or, when no retry comes, the relay (api/services/relay.py).
    await hand_over_bounded(db, temporal, settings, msg, first=True)
    return {"message_id": msg.id, "routing": message_view(msg)["routing"]}, 202


async def _same_client_message(s: Any, user_id: str, client_id: str | None) -> MessageRow | None:
    if not client_id:
        return None
    row: MessageRow | None = await s.scalar(
        select(MessageRow).where(
            MessageRow.user_id == user_id, MessageRow.client_message_id == client_id
        )
    )
    return row


@router.post("/messages", status_code=202)
async def post_message(
    body: MessageIn,
    request: Request,
    user: UserDep,
    channel: ChannelDep,
    db: DbDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    temporal = request.app.state.temporal
    result, _ = await accept_message(body, user, db, settings, temporal, body.task_id, channel)
    return result


@router.get("/messages/{message_id}")
async def get_message(message_id: str, user: UserDep, db: DbDep) -> dict[str, Any]:
    async with db.session() as s:
        m = await s.get(MessageRow, message_id)
        if m is None or m.user_id != user.id:
            raise NotFound(f"no message {message_id}")
        return message_view(m)

"""Messages: the person says something; read back how it was routed and where it stands;
withdraw one its task has not read, or move one to another task."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ChannelDep, CurrentUser, DbDep, SessionDep, SettingsDep, TemporalGetterDep
from api.schemas.messages import MessageAccepted, MessageIn, MessageView, MoveIn
from api.services import corrections, messages

router = APIRouter(prefix="/v1", tags=["messages"])


@router.post("/messages", status_code=202, response_model_exclude_unset=True)
async def post_message(
    body: MessageIn,
    user: CurrentUser,
    channel: ChannelDep,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalGetterDep,
) -> MessageAccepted:
    """Stored, then handed to Temporal within a bound; 202 either way (the relay finishes
    a hand-off that did not go through). The same `client_message_id` again stores nothing
    new."""
    return await messages.accept_message(db, temporal, settings, user, body, channel)


@router.get("/messages/{message_id}", response_model_exclude_unset=True)
async def get_message(message_id: str, user: CurrentUser, session: SessionDep) -> MessageView:
    return await messages.get_message(session, user.id, message_id)


@router.delete("/messages/{message_id}", response_model_exclude_unset=True)
async def withdraw_message(
    message_id: str,
    user: CurrentUser,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalGetterDep,
) -> MessageView:
    """Withdrawn: its task never acts on it. 409 `already_read` once its task read it."""
    return await corrections.withdraw_message(db, temporal, settings, user.id, message_id)


@router.post("/messages/{message_id}/move", response_model_exclude_unset=True)
async def move_message(
    message_id: str,
    body: MoveIn,
    user: CurrentUser,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalGetterDep,
) -> MessageView:
    """To another task, as a new message there; the task it leaves is told."""
    return await corrections.move_message(db, temporal, settings, user, message_id, body)

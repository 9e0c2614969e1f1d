"""Tasks: read them, send one a message, and the person's controls."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import (
    ChannelDep,
    CurrentUser,
    DbDep,
    PageDep,
    SessionDep,
    SettingsDep,
    TemporalDep,
    TemporalGetterDep,
)
from api.schemas.messages import MessageAccepted, MessageIn, MessageList, TaskMessageIn
from api.schemas.tasks import ContextView, ResumeIn, TaskList, TaskView
from api.services import messages, tasks

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])


@router.get("", response_model_exclude_unset=True)
async def list_tasks(
    user: CurrentUser,
    session: SessionDep,
    page: PageDep,
    status: str | None = None,
    include_lightweight: bool = False,
) -> TaskList:
    """Newest first, a page at a time."""
    return await tasks.list_tasks(session, user.id, status, include_lightweight, page)


@router.get("/{task_id}", response_model_exclude_unset=True)
async def get_task(task_id: str, user: CurrentUser, session: SessionDep) -> TaskView:
    return await tasks.task_detail(session, user.id, task_id)


@router.get("/{task_id}/context")
async def get_context(task_id: str, user: CurrentUser, session: SessionDep) -> ContextView:
    """What the task's last model call was sent, layer by layer, and what it cost."""
    return await tasks.last_context(session, user.id, task_id)


@router.get("/{task_id}/messages", response_model_exclude_unset=True)
async def list_task_messages(
    task_id: str,
    user: CurrentUser,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> MessageList:
    """The person's messages in the task, oldest first (the latest `limit`), each with its
    state: received, read, withdrawn, moved."""
    return await messages.task_messages(session, user.id, task_id, limit)


@router.post("/{task_id}/messages", status_code=202, response_model_exclude_unset=True)
async def post_task_message(
    task_id: str,
    body: TaskMessageIn,
    user: CurrentUser,
    channel: ChannelDep,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalGetterDep,
) -> MessageAccepted:
    full = MessageIn(text=body.text, client_message_id=body.client_message_id, task_id=task_id)
    return await messages.accept_message(db, temporal, settings, user, full, channel)


@router.post("/{task_id}/stop", response_model_exclude_unset=True)
async def stop(task_id: str, user: CurrentUser, db: DbDep, temporal: TemporalDep) -> TaskView:
    return await tasks.stop(db, temporal, user.id, task_id)


@router.post("/{task_id}/pause", response_model_exclude_unset=True)
async def pause(task_id: str, user: CurrentUser, db: DbDep, temporal: TemporalDep) -> TaskView:
    return await tasks.pause(db, temporal, user.id, task_id)


@router.post("/{task_id}/resume", response_model_exclude_unset=True)
async def resume(
    task_id: str,
    user: CurrentUser,
    db: DbDep,
    temporal: TemporalDep,
    body: ResumeIn | None = None,
) -> TaskView:
    return await tasks.resume(db, temporal, user.id, task_id, body or ResumeIn())


@router.post("/{task_id}/archive", response_model_exclude_unset=True)
async def archive(task_id: str, user: CurrentUser, db: DbDep, temporal: TemporalDep) -> TaskView:
    return await tasks.archive(db, temporal, user.id, task_id)


@router.post("/{task_id}/promote", response_model_exclude_unset=True)
async def promote(task_id: str, user: CurrentUser, db: DbDep, temporal: TemporalDep) -> TaskView:
    return await tasks.promote(db, temporal, user.id, task_id)

"""Routing of explicit targets (docs/architecture.md#routing): a task id, a card, or an object
that belongs to exactly one task decides the task without any model; then the target is
checked (archived, stopped, deleted object, not the person's) so nothing fails silently."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from cards.store import get_card
from lomo.db.models import Task, TaskObject, WorkObject
from lomo.errors import Conflict, InvalidInput, NotFound
from lomo.states import TaskStatus
from tasks.lifecycle import RESTARTABLE_TASK


@dataclass
class Target:
    task_id: str | None  # None: no explicit target, route semantically
    restart: bool = False  # the task's workflow has ended; the main thread starts it again
    # Tasks an object points to when it is shared by several (semantic routing narrows to
    # these candidates).
    object_tasks: tuple[str, ...] = ()


async def check_task(s: AsyncSession, user_id: str, task_id: str) -> Task:
    """The task a message may go to, or a clear error saying why not."""
    task = await s.get(Task, task_id)
    if task is None or task.user_id != user_id:
        raise NotFound(f"no task {task_id}")
    if task.status == TaskStatus.ARCHIVED:
        raise Conflict(
            f"task {task_id} is archived; reopen it (POST /v1/tasks/{task_id}/resume) or send "
            "the message without a target to start something new",
            task_status="archived",
        )
    if task.status == TaskStatus.STOPPED:
        raise Conflict(
            f"task {task_id} was stopped and takes no messages; send the message without a "
            "target to start again",
            task_status="stopped",
        )
    return task


async def resolve_target(
    s: AsyncSession,
    user_id: str,
    task_id: str | None,
    card_id: str | None,
    object_id: str | None,
) -> Target:
    if object_id:
        obj = await s.get(WorkObject, object_id)
        if obj is None or obj.user_id != user_id:
            raise NotFound(f"no object {object_id}")
        if obj.deleted:
            raise Conflict(f"object {object_id} ({obj.name}) was deleted", object_status="deleted")
    if card_id and not task_id:
        card = await get_card(s, user_id, card_id)
        if card.task_id is None:
            raise InvalidInput(
                f"card {card_id} belongs to no task; "
                f"answer it with POST /v1/cards/{card_id}/actions"
            )
        task_id = card.task_id
    if object_id and not task_id:
        owners = tuple(
            await s.scalars(
                select(TaskObject.task_id)
                .join(Task, Task.id == TaskObject.task_id)
                .where(TaskObject.object_id == object_id, Task.user_id == user_id)
                .order_by(TaskObject.task_id)
            )
        )
        if len(owners) != 1:
            return Target(None, object_tasks=owners)
        task_id = owners[0]
    if not task_id:
        return Target(None)
    task = await check_task(s, user_id, task_id)
    return Target(task.id, restart=task.status in RESTARTABLE_TASK)

"""Creating, promoting and reopening a task row, each with the event the person's clients
follow. The task's workflow owns everything else about its status."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import MessageRow, Task
from lomo.errors import NotFound
from lomo.events import append_event
from lomo.ids import new_id
from lomo.states import CLOSED_TASK, EventType, TaskKind, TaskStatus

# A finished task takes a follow-up by being started again in place (the main thread does
# that); the closed statuses end the task for good until the person reopens it.
RESTARTABLE_TASK = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED})


def is_closed(task: Task) -> bool:
    """The person closed it: nothing is delivered to it until they reopen it."""
    return task.status in CLOSED_TASK


def needs_restart(task: Task) -> bool:
    """Its workflow has ended, so a message for it starts the task again in place."""
    return task.status in RESTARTABLE_TASK or is_closed(task)


async def own_task(s: AsyncSession, user_id: str, task_id: str) -> Task:
    """The person's task; another person's is as unknown as a made-up id."""
    task = await s.get(Task, task_id)
    if task is None or task.user_id != user_id:
        raise NotFound(f"no task {task_id}")
    return task


async def create_task(
    s: AsyncSession,
    *,
    user_id: str,
    kind: TaskKind,
    goal: str,
    summary: str,
    language: str,
    now: datetime,
    prepare: Callable[[Task], Awaitable[None]] | None = None,
) -> Task:
    """A running task and its `task.created` event; its workflow is started by the caller.
    `prepare` sets up what must hold before anyone hears of the task (e.g. its autonomy)."""
    task = Task(
        id=new_id("tsk"),
        user_id=user_id,
        kind=kind,
        status=TaskStatus.RUNNING,
        goal=goal[:500],
        summary=summary[:1000],
        language=language,
        created_at=now,
        updated_at=now,
    )
    s.add(task)
    await s.flush()
    if prepare is not None:
        await prepare(task)
    await append_event(s, user_id, EventType.TASK_CREATED, {"task_id": task.id, "kind": kind})
    return task


async def promote(s: AsyncSession, task: Task) -> None:
    """Lightweight → persistent: the task shows in the task list from now on."""
    task.kind = TaskKind.PERSISTENT
    await append_event(s, task.user_id, EventType.TASK_PROMOTED, {"task_id": task.id})


async def archive_ended(s: AsyncSession, task: Task) -> None:
    """Archive a task whose workflow has ended (nothing runs to write the status)."""
    task.status, task.status_reason = TaskStatus.ARCHIVED, f"archived after {task.status}"
    await append_event(
        s, task.user_id, EventType.TASK_STATUS, {"task_id": task.id, "status": task.status}
    )


def reopen(task: Task, now: datetime) -> bool:
    """Mark a task whose workflow has ended as running again (the caller starts it);
    either way it is the most recently active task now. Whether it had ended."""
    restart = needs_restart(task)
    if restart:
        task.status = TaskStatus.RUNNING
    task.updated_at = now
    return restart


async def followups(s: AsyncSession, task_id: str, besides: str) -> int:
    """How many messages the task has had, other than `besides`."""
    n = await s.scalar(
        select(func.count())
        .select_from(MessageRow)
        .where(MessageRow.task_id == task_id, MessageRow.id != besides)
    )
    return int(n or 0)

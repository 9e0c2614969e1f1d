"""Tasks: their views (state, checklist, cards, artifacts), the context of their last model
call, and the person's controls (stop, pause, resume, archive, promote), each handed to
the task's workflow and answered with the task as it is after."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client

from api.dispatch.tasks import archive_task, pause_task, promote_task, resume_task, stop_task
from api.schemas.tasks import ContextView, ResumeIn, TaskList, TaskView
from api.services.pages import finish
from cards.views import card_view
from checklist.items import item_view
from lomo.contracts.task import ResumeInput
from lomo.db.engine import Database
from lomo.db.models import Card, ChecklistItem, ModelStep, Task, TaskObject
from lomo.db.pages import Page, by_creation
from lomo.errors import Conflict, NotFound
from lomo.states import TERMINAL_TASK, TaskKind, TaskStatus
from tasks.lifecycle import archive_ended, own_task
from tasks.lifecycle import promote as promote_task_row


async def task_detail(s: AsyncSession, user_id: str, task_id: str) -> TaskView:
    t = await own_task(s, user_id, task_id)
    arts = await s.scalars(
        select(TaskObject.object_id).where(
            TaskObject.task_id == t.id, TaskObject.role == "artifact"
        )
    )
    items = await s.scalars(
        select(ChecklistItem).where(ChecklistItem.task_id == t.id).order_by(ChecklistItem.position)
    )
    cards = await s.scalars(select(Card).where(Card.task_id == t.id).order_by(Card.created_at))
    view = _task_view(t, list(arts))
    view["checklist"] = [item_view(i) for i in items]
    view["cards"] = [card_view(c) for c in cards]
    return TaskView.model_validate(view)


async def read_task(db: Database, user_id: str, task_id: str) -> TaskView:
    """The task in a transaction of its own: what the workflow committed so far."""
    async with db.session() as s:
        return await task_detail(s, user_id, task_id)


async def list_tasks(
    s: AsyncSession, user_id: str, status: str | None, include_lightweight: bool, page: Page
) -> TaskList:
    """Newest first."""
    q = select(Task).where(Task.user_id == user_id)
    if status:
        q = q.where(Task.status == status)
    if not include_lightweight:
        q = q.where(Task.kind == TaskKind.PERSISTENT)
    q = await by_creation(
        s, q, Task.created_at, Task.id, page, descending=True, scope=[Task.user_id == user_id]
    )
    rows, after = finish(list(await s.scalars(q)), page, lambda t: t.id)
    links = await s.execute(
        select(TaskObject.task_id, TaskObject.object_id).where(
            TaskObject.task_id.in_([t.id for t in rows]), TaskObject.role == "artifact"
        )
    )
    arts: dict[str, list[str]] = {}
    for task_id, object_id in links:
        arts.setdefault(task_id, []).append(object_id)
    views = [_task_view(t, arts.get(t.id)) for t in rows]
    return TaskList.model_validate({"tasks": views, "next": after})


def _task_view(t: Task, artifacts: list[str] | None = None) -> dict[str, Any]:
    return {
        "task_id": t.id,
        "kind": t.kind,
        "status": t.status,
        "status_reason": t.status_reason,
        "goal": t.goal,
        "summary": t.summary,
        "language": t.language,
        "turn": t.turn,
        "checklist": [],
        "cards": [],
        "waiting_on": t.waiting_on,
        "artifacts": artifacts or [],
        "created_at": t.created_at.isoformat(),
        "updated_at": t.updated_at.isoformat(),
    }


async def last_context(s: AsyncSession, user_id: str, task_id: str) -> ContextView:
    """What the task's last model call was sent, layer by layer, and what it cost."""
    await own_task(s, user_id, task_id)
    last = await s.scalar(
        select(ModelStep).where(ModelStep.task_id == task_id).order_by(ModelStep.id.desc())
    )
    if last is None:
        raise NotFound(f"task {task_id} has not called the model yet")
    layers = last.context["layers"]
    prefix = last.context.get("prefix", {})
    return ContextView.model_validate(
        {
            "layers": layers,
            "tools": last.context.get("tools", []),
            "total_tokens": sum(int(layer["tokens"]) for layer in layers),
            "turn": last.turn,
            "step": last.step,
            "loaded_domains": prefix.get("domains", []),
            "loaded_guides": [
                {"name": n, "tokens": prefix.get("guide_tokens", {}).get(n, 0)}
                for n in prefix.get("guides", [])
            ],
            "tool_tokens": {
                "core": prefix.get("core_tool_tokens", 0),
                "loaded": prefix.get("loaded_tool_tokens", 0),
            },
            "prefix_changes": prefix.get("changes", []),
            "prefix_events": prefix.get("events", []),
            "usage": last.response.get("usage", {}),
        }
    )


async def _control(
    db: Database, user_id: str, task_id: str, send: Callable[[], Awaitable[None]]
) -> TaskView:
    """Check the task is the person's, hand the control to its workflow, read it again."""
    await read_task(db, user_id, task_id)
    await send()
    return await read_task(db, user_id, task_id)


async def stop(db: Database, temporal: Client, user_id: str, task_id: str) -> TaskView:
    return await _control(db, user_id, task_id, lambda: stop_task(temporal, task_id))


async def pause(db: Database, temporal: Client, user_id: str, task_id: str) -> TaskView:
    return await _control(db, user_id, task_id, lambda: pause_task(temporal, task_id))


async def resume(
    db: Database, temporal: Client, user_id: str, task_id: str, limits: ResumeIn
) -> TaskView:
    raised = ResumeInput(limits.max_steps_per_turn, limits.max_turns_without_progress)
    return await _control(db, user_id, task_id, lambda: resume_task(temporal, task_id, raised))


async def archive(db: Database, temporal: Client, user_id: str, task_id: str) -> TaskView:
    view = await read_task(db, user_id, task_id)
    if view.status == TaskStatus.ARCHIVED:
        return view
    if not await archive_task(temporal, task_id):
        # The workflow has ended (a completed or stopped task): archive the record only.
        async with db.session() as s:
            t = await s.get(Task, task_id, with_for_update=True)
            assert t is not None
            await archive_ended(s, t)
    return await read_task(db, user_id, task_id)


async def promote(db: Database, temporal: Client, user_id: str, task_id: str) -> TaskView:
    """A lightweight task becomes persistent; only a live one can."""
    view = await read_task(db, user_id, task_id)
    if view.kind == TaskKind.PERSISTENT:
        return view
    if view.status in TERMINAL_TASK:
        raise Conflict(f"task {task_id} is {view.status}; only a live task is promoted")
    await promote_task(temporal, task_id)
    async with db.session() as s:  # the workflow's own status write carries the kind too
        t = await s.get(Task, task_id, with_for_update=True)
        assert t is not None
        await promote_task_row(s, t)
    return await read_task(db, user_id, task_id)

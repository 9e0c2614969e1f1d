from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from sqlalchemy import select

from api.deps import ChannelDep, DbDep, SettingsDep, TemporalDep, UserDep
from api.dispatch.tasks import archive_task, pause_task, promote_task, resume_task, stop_task
from api.routes.messages import MessageIn, accept_message
from lomo.cards import card_view
from lomo.db.models import Card, ModelStep, Task, TaskObject
from lomo.errors import Conflict, NotFound
from lomo.events import append_event
from tools.checklist import item_view, load_items
from workflows.types import ResumeInput

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])


class TaskMessageIn(BaseModel):
    text: str = Field(min_length=1)
    client_message_id: str | None = Field(default=None, max_length=200)


async def _task(db: Any, user_id: str, task_id: str) -> dict[str, Any]:
    async with db.session() as s:
        t = await s.get(Task, task_id)
        if t is None or t.user_id != user_id:
            raise NotFound(f"no task {task_id}")
        arts = await s.scalars(
            select(TaskObject.object_id).where(
                TaskObject.task_id == t.id, TaskObject.role == "artifact"
            )
        )
        items = await load_items(s, t.id)
        cards = await s.scalars(select(Card).where(Card.task_id == t.id).order_by(Card.created_at))
        view = task_view(t, list(arts))
        view["checklist"] = [item_view(i) for i in items]
        view["cards"] = [card_view(c) for c in cards]
        return view


def task_view(t: Task, artifacts: list[str] | None = None) -> dict[str, Any]:
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


@router.get("")
async def list_tasks(
    user: UserDep, db: DbDep, status: str | None = None, include_lightweight: bool = False
) -> dict[str, Any]:
    async with db.session() as s:
        q = select(Task).where(Task.user_id == user.id).order_by(Task.created_at.desc())
        if status:
            q = q.where(Task.status == status)
        if not include_lightweight:
            q = q.where(Task.kind == "persistent")
        rows = list(await s.scalars(q))
        links = await s.execute(
            select(TaskObject.task_id, TaskObject.object_id).where(
                TaskObject.task_id.in_([t.id for t in rows]), TaskObject.role == "artifact"
            )
        )
        arts: dict[str, list[str]] = {}
        for task_id, object_id in links:
            arts.setdefault(task_id, []).append(object_id)
        return {"tasks": [task_view(t, arts.get(t.id)) for t in rows]}


@router.get("/{task_id}")
async def get_task(task_id: str, user: UserDep, db: DbDep) -> dict[str, Any]:
    return await _task(db, user.id, task_id)


@router.get("/{task_id}/context")
async def get_context(task_id: str, user: UserDep, db: DbDep) -> dict[str, Any]:
    await _task(db, user.id, task_id)
    async with db.session() as s:
        last = await s.scalar(
            select(ModelStep).where(ModelStep.task_id == task_id).order_by(ModelStep.id.desc())
        )
        if last is None:
            raise NotFound(f"task {task_id} has not called the model yet")
        layers = last.context["layers"]
        prefix = last.context.get("prefix", {})
        return {
            # Each layer: name, text, tokens and `cached` (true: the same bytes as the step
            # before, so the prompt cache serves it; "partly": the history up to that step).
            "layers": layers,
            "tools": last.context.get("tools", []),
            "total_tokens": sum(int(layer["tokens"]) for layer in layers),
            "turn": last.turn,
            "step": last.step,
            "loaded_domains": prefix.get("domains", []),
            "tool_tokens": {
                "core": prefix.get("core_tool_tokens", 0),
                "loaded": prefix.get("loaded_tool_tokens", 0),
            },
            "prefix_changes": prefix.get("changes", []),
            # Appended without touching the prefix: domain loads and unloads, profile additions.
            "prefix_events": prefix.get("events", []),
            # What the model provider reported for that request (prompt-cache reads/writes).
            "usage": last.response.get("usage", {}),
        }


@router.post("/{task_id}/messages", status_code=202)
async def post_task_message(
    task_id: str,
    body: TaskMessageIn,
    request: Request,
    user: UserDep,
    channel: ChannelDep,
    db: DbDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    # The Temporal client is resolved after the message is stored (accept_message).
    temporal = request.app.state.temporal
    full = MessageIn(text=body.text, client_message_id=body.client_message_id, task_id=task_id)
    result, _ = await accept_message(full, user, db, settings, temporal, task_id, channel)
    return result


@router.post("/{task_id}/stop")
async def stop(task_id: str, user: UserDep, db: DbDep, temporal: TemporalDep) -> dict[str, Any]:
    await _task(db, user.id, task_id)
    await stop_task(temporal, task_id)
    return await _task(db, user.id, task_id)


class ResumeIn(BaseModel):
    """Optional raised limits for a task the runtime stopped at a limit."""

    max_steps_per_turn: int | None = Field(default=None, ge=1, le=1000)
    max_turns_without_progress: int | None = Field(default=None, ge=1, le=1000)


@router.post("/{task_id}/pause")
async def pause(task_id: str, user: UserDep, db: DbDep, temporal: TemporalDep) -> dict[str, Any]:
    await _task(db, user.id, task_id)
    await pause_task(temporal, task_id)
    return await _task(db, user.id, task_id)


@router.post("/{task_id}/resume")
async def resume(
    task_id: str, user: UserDep, db: DbDep, temporal: TemporalDep, body: ResumeIn | None = None
) -> dict[str, Any]:
    await _task(db, user.id, task_id)
    limits = body or ResumeIn()
    await resume_task(
        temporal,
        task_id,
        ResumeInput(limits.max_steps_per_turn, limits.max_turns_without_progress),
    )
    return await _task(db, user.id, task_id)


@router.post("/{task_id}/archive")
async def archive(task_id: str, user: UserDep, db: DbDep, temporal: TemporalDep) -> dict[str, Any]:
    view = await _task(db, user.id, task_id)
    if view["status"] == "archived":
        return view
    if not await archive_task(temporal, task_id):
        # The workflow has ended (a completed or stopped task): archive the record only.
        async with db.session() as s:
            t = await s.get(Task, task_id, with_for_update=True)
            assert t is not None
            t.status, t.status_reason = "archived", f"archived after {t.status}"
            await append_event(
                s, user.id, "task.status", {"task_id": task_id, "status": "archived"}
            )
    return await _task(db, user.id, task_id)


@router.post("/{task_id}/promote")
async def promote(task_id: str, user: UserDep, db: DbDep, temporal: TemporalDep) -> dict[str, Any]:
    view = await _task(db, user.id, task_id)
    if view["kind"] == "persistent":
        return view
    if view["status"] in ("completed", "stopped", "archived", "failed"):
        raise Conflict(f"task {task_id} is {view['status']}; only a live task is promoted")
    await promote_task(temporal, task_id)
    async with db.session() as s:  # the workflow's own status write carries the kind too
        t = await s.get(Task, task_id, with_for_update=True)
        assert t is not None
        t.kind = "persistent"
        await append_event(s, user.id, "task.promoted", {"task_id": task_id})
    return await _task(db, user.id, task_id)

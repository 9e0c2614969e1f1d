"""Memory (API.md "Memory"): list, profile, history, forget (card), correct."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from temporalio.client import WorkflowUpdateFailedError

from api.deps import DbDep, SettingsDep, TemporalDep, UserDep
from api.dispatch.memory import request_correction
from lomo.errors import Conflict, InvalidInput, NotFound
from lomo.ids import new_id
from memory import views
from memory.cards import request_forget_card
from memory.models import Evidence, Memory

router = APIRouter(prefix="/v1/memory", tags=["memory"])


class ForgetIn(BaseModel):
    memory_id: str | None = Field(default=None, max_length=40)
    text: str | None = Field(default=None, max_length=2000)


class CorrectIn(BaseModel):
    content: str = Field(min_length=1, max_length=2000)


@router.get("")
async def list_memories(user: UserDep, db: DbDep, scope: str | None = None) -> dict[str, Any]:
    if scope is not None and scope not in views.SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(views.SCOPES)}")
    async with db.session() as s:
        return {"memories": await views.list_memories(s, user.id, scope)}


@router.get("/profile")
async def get_profile(user: UserDep, db: DbDep) -> dict[str, Any]:
    async with db.session() as s:
        return await views.profile(s, user.id)


@router.get("/{memory_id}/history")
async def get_history(memory_id: str, user: UserDep, db: DbDep) -> dict[str, Any]:
    async with db.session() as s:
        return await views.history(s, user.id, memory_id)


@router.post("/forget", status_code=202)
async def forget(body: ForgetIn, user: UserDep, db: DbDep) -> dict[str, Any]:
    async with db.session() as s:
        card = await request_forget_card(s, user.id, body.memory_id, body.text)
        return {"card_id": card.id}


@router.post("/{memory_id}/correct")
async def correct(
    memory_id: str,
    body: CorrectIn,
    user: UserDep,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalDep,
) -> JSONResponse:
    """The person's correction becomes a new, stated version (through the person's
    MemoryWorkflow, so it never races an extraction or a forget)."""
    async with db.session() as s:
        memory = await s.get(Memory, memory_id)
        if memory is None or memory.user_id != user.id:
            raise NotFound(f"no memory {memory_id}")
        if memory.status != "active":
            raise Conflict(f"memory {memory_id} was forgotten")
        ev = Evidence(
            id=new_id("evd"),
            user_id=user.id,
            source="correction",
            source_ref=f"{memory_id}:{new_id('cor')}",
            text=body.content.strip(),
            usable=True,
            candidates=[],
        )
        s.add(ev)
    try:
        out = await request_correction(temporal, settings, user.id, ev.id)
    except WorkflowUpdateFailedError as e:  # e.g. forgotten meanwhile by an earlier job
        raise Conflict(f"the correction was not applied: {e.cause}") from e
    async with db.session() as s:
        return JSONResponse(await views.history(s, user.id, out.memory_id))

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sqlalchemy import select

from api.deps import AssetsDep, DbDep, UserDep
from lomo.db.models import WorkObject
from lomo.errors import NotFound
from lomo.events import append_event
from workspace import store

router = APIRouter(prefix="/v1/objects", tags=["objects"])


class ObjectIn(BaseModel):
    type: Literal["document", "flow"]  # assets come from generations (or the asset issue)
    name: str = Field(min_length=1, max_length=300)
    content: dict[str, Any]


class WriteIn(BaseModel):
    base_version: int = Field(ge=1)
    content: dict[str, Any]


@router.get("")
async def list_objects(user: UserDep, db: DbDep, type: str | None = None) -> dict[str, Any]:
    async with db.session() as s:
        q = select(WorkObject).where(WorkObject.user_id == user.id, WorkObject.deleted.is_(False))
        if type:
            q = q.where(WorkObject.type == type)
        rows = await s.scalars(q.order_by(WorkObject.created_at))
        return {
            "objects": [
                {"object_id": o.id, "type": o.type, "name": o.name, "version": o.version}
                for o in rows
            ]
        }


@router.post("", status_code=201)
async def create(body: ObjectIn, user: UserDep, db: DbDep) -> dict[str, Any]:
    async with db.session() as s:
        o = await store.create_object(s, user.id, body.type, body.name, body.content, "user")
        await append_event(s, user.id, "object.version", {"object_id": o.id, "version": 1})
        return {"object_id": o.id, "type": o.type, "name": o.name, "version": o.version}


@router.get("/{object_id}")
async def get(
    object_id: str, user: UserDep, db: DbDep, version: int | None = None
) -> dict[str, Any]:
    async with db.session() as s:
        o, v = await store.get_version(s, user.id, object_id, version)
        return {
            "object_id": o.id,
            "type": o.type,
            "name": o.name,
            "version": v.version,
            "content": v.content,
            "created_by": v.created_by,
            "task_ids": await store.task_ids_for(s, o.id),
        }


@router.put("/{object_id}")
async def put(object_id: str, body: WriteIn, user: UserDep, db: DbDep) -> dict[str, Any]:
    async with db.session() as s:
        o = await store.write_object(s, user.id, object_id, body.base_version, body.content, "user")
        await append_event(s, user.id, "object.version", {"object_id": o.id, "version": o.version})
        return {"object_id": o.id, "type": o.type, "name": o.name, "version": o.version}


@router.get("/{object_id}/blob")
async def blob(
    object_id: str, user: UserDep, db: DbDep, assets: AssetsDep, version: int | None = None
) -> Response:
    async with db.session() as s:
        _, v = await store.get_version(s, user.id, object_id, version)
        if not v.blob_path:
            raise NotFound(f"object {object_id} has no bytes")
        return Response(assets.get(v.blob_path), media_type=v.media_type)

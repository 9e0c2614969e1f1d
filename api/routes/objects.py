"""Workspace objects (API.md "Workspace objects"). The person's edits change rows and emit
`object.version`; they never wake a task (tasks see them as change notices)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sqlalchemy import select

from api.deps import MAX_DB_INT, AssetsDep, DbDep, SettingsDep, UserDep
from lomo.db.models import ObjectVersion, WorkObject
from lomo.errors import InvalidInput, NotFound, TooLarge
from lomo.events import append_event
from workspace import store, writes
from workspace.blobs import BlobStore
from workspace.cards import request_delete
from workspace.edits import parse_edits

router = APIRouter(prefix="/v1/objects", tags=["objects"])
Version = Annotated[int | None, Query(ge=1, le=MAX_DB_INT)]


class ObjectIn(BaseModel):
    type: Literal["document", "flow", "asset"]
    name: str = Field(min_length=1, max_length=300)
    # documents {"text"}; flows {"nodes"}; assets {"media_type", "data_base64", ...}
    content: dict[str, Any]


class WriteIn(BaseModel):
    base_version: int = Field(ge=1, le=MAX_DB_INT)
    content: dict[str, Any]


class EditIn(BaseModel):
    base_version: int | None = Field(default=None, ge=1, le=MAX_DB_INT)
    edits: list[dict[str, Any]] | None = None  # documents
    nodes: dict[str, dict[str, Any] | None] | None = None  # flows


def _summary(o: WorkObject) -> dict[str, Any]:
    return {"object_id": o.id, "type": o.type, "name": o.name, "version": o.version}


def _asset_bytes(content: dict[str, Any], limit: int) -> tuple[dict[str, Any], bytes, str]:
    """Split an asset upload into its stored content (without the bytes) and the bytes."""
    media_type = content.get("media_type")
    if not isinstance(media_type, str) or "/" not in media_type or len(media_type) > 80:
        raise InvalidInput("an asset needs a 'media_type' such as image/png")
    try:
        data = base64.b64decode(str(content.get("data_base64", "")), validate=True)
    except (binascii.Error, ValueError) as e:
        raise InvalidInput("'data_base64' is not valid base64") from e
    if not data:
        raise InvalidInput("an asset needs at least one byte")
    if len(data) > limit:
        raise TooLarge(
            f"the file is {len(data) / 1e6:.1f} MB; uploads are limited to {limit / 1e6:.1f} MB",
            limit_bytes=limit,
        )
    rest = {k: v for k, v in content.items() if k != "data_base64"}
    return rest, data, media_type


@router.get("")
async def list_objects(user: UserDep, db: DbDep, type: str | None = None) -> dict[str, Any]:
    async with db.session() as s:
        q = select(WorkObject).where(WorkObject.user_id == user.id, WorkObject.deleted.is_(False))
        if type:
            q = q.where(WorkObject.type == type)
        rows = await s.scalars(q.order_by(WorkObject.created_at))
        return {"objects": [_summary(o) for o in rows]}


@router.post("", status_code=201)
async def create(
    body: ObjectIn, user: UserDep, db: DbDep, assets: AssetsDep, settings: SettingsDep
) -> dict[str, Any]:
    async with db.session() as s:
        if body.type == "asset":
            content, data, media_type = _asset_bytes(body.content, settings.max_upload_bytes)
            provenance = {k: v for k, v in content.items() if k != "media_type"}
            blobs: BlobStore = assets
            o = await store.create_asset(
                s, blobs, user.id, body.name, data, media_type, store.PERSON, provenance
            )
        else:
            o = await store.create_object(
                s, user.id, body.type, body.name, body.content, store.PERSON
            )
        await append_event(
            s,
            user.id,
            "object.version",
            {**_summary(o), "created_by": store.PERSON, "summary": "created"},
        )
        return _summary(o)


@router.get("/{object_id}")
async def get(object_id: str, user: UserDep, db: DbDep, version: Version = None) -> dict[str, Any]:
    async with db.session() as s:
        o, v = await store.get_version(s, user.id, object_id, version)
        return {
            "object_id": o.id,
            "type": o.type,
            "name": o.name,
            "version": v.version,
            "current_version": o.version,
            "content": v.content,
            "created_by": v.created_by,
            "created_at": v.created_at.isoformat(),
            "task_ids": await store.task_ids_for(s, o.id),
        }


@router.get("/{object_id}/versions")
async def versions(object_id: str, user: UserDep, db: DbDep) -> dict[str, Any]:
    """Every version kept: who made it, when, and what changed against the previous one."""
    async with db.session() as s:
        o = await store.get_live(s, user.id, object_id)
        rows = await s.scalars(
            select(ObjectVersion)
            .where(ObjectVersion.object_id == o.id)
            .order_by(ObjectVersion.version)
        )
        return {
            "object_id": o.id,
            "versions": [
                {
                    "version": v.version,
                    "created_by": v.created_by,
                    "created_at": v.created_at.isoformat(),
                    "summary": v.summary,
                }
                for v in rows
            ],
        }


@router.put("/{object_id}")
async def put(
    object_id: str,
    body: WriteIn,
    user: UserDep,
    db: DbDep,
    assets: AssetsDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    async with db.session() as s:
        o = await store.get_live(s, user.id, object_id)
        content = body.content
        blob = None
        if o.type == "asset":
            content, data, media_type = _asset_bytes(content, settings.max_upload_bytes)
            blob = (assets, data, media_type)
        w = await writes.write_object(
            s, user.id, object_id, body.base_version, content, store.PERSON, blob=blob
        )
        return w.view()


@router.patch("/{object_id}")
async def patch(object_id: str, body: EditIn, user: UserDep, db: DbDep) -> dict[str, Any]:
    async with db.session() as s:
        o = await store.get_live(s, user.id, object_id)
        if o.type == "document":
            edits = parse_edits(body.edits or [])
            w = await writes.edit_document(
                s, user.id, object_id, edits, store.PERSON, body.base_version
            )
        elif o.type == "flow":
            if body.base_version is None or body.nodes is None:
                raise InvalidInput("a flow edit needs base_version and nodes")
            w = await writes.edit_flow(
                s, user.id, object_id, body.base_version, body.nodes, store.PERSON
            )
        else:
            raise InvalidInput("assets are replaced with PUT, not edited")
        return w.view()


@router.delete("/{object_id}", status_code=202)
async def delete(object_id: str, user: UserDep, db: DbDep) -> dict[str, Any]:
    """Deletion is irreversible: it happens only when the person confirms the card."""
    async with db.session() as s:
        card = await request_delete(s, user.id, object_id)
        return {"card_id": card.id}


@router.get("/{object_id}/blob")
async def blob(
    object_id: str, user: UserDep, db: DbDep, assets: AssetsDep, version: Version = None
) -> Response:
    async with db.session() as s:
        _, v = await store.get_version(s, user.id, object_id, version)
        if not v.blob_path:
            raise NotFound(f"object {object_id} has no bytes")
        return Response(assets.get(v.blob_path), media_type=v.media_type)

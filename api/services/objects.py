"""Workspace objects as the person edits them. Each edit changes rows and emits
`object.version`; it never wakes a task (tasks see edits as change notices)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.schemas.common import CardRef
from api.schemas.objects import (
    EditIn,
    ObjectDiff,
    ObjectIn,
    ObjectList,
    ObjectSummary,
    ObjectView,
    VersionList,
    WriteIn,
    Written,
)
from api.services.pages import finish
from lomo.db.models import ObjectVersion, Task, WorkObject
from lomo.db.pages import Page, by_creation, by_number
from lomo.errors import InvalidInput, NotFound, TooLarge, UnsupportedMediaType
from lomo.events import append_event
from lomo.states import EventType
from workspace import diff, media, store, writes
from workspace.cards import request_delete
from workspace.edits import parse_edits
from workspace.store import BlobStore


def _summary(o: WorkObject) -> dict[str, Any]:
    return {"object_id": o.id, "type": o.type, "name": o.name, "version": o.version}


def _asset_bytes(content: dict[str, Any], limit: int) -> tuple[dict[str, Any], bytes, str]:
    """Split an asset upload into its stored content (without the bytes) and the bytes."""
    media_type = content.get("media_type")
    if not isinstance(media_type, str) or "/" not in media_type or len(media_type) > 80:
        raise InvalidInput("an asset needs a 'media_type' such as image/png")
    if not media.allowed(media_type):
        raise UnsupportedMediaType(
            f"'{media_type[:80]}' is not an accepted media type for an asset",
            accepted=sorted(media.ALLOWED),
        )
    media_type = media.base_type(media_type)
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


async def list_objects(s: AsyncSession, user_id: str, type: str | None, page: Page) -> ObjectList:
    """Oldest first. A cursor stays good when its object is deleted meanwhile."""
    q = select(WorkObject).where(WorkObject.user_id == user_id, WorkObject.deleted.is_(False))
    if type:
        q = q.where(WorkObject.type == type)
    mine = [WorkObject.user_id == user_id]
    q = await by_creation(
        s, q, WorkObject.created_at, WorkObject.id, page, descending=False, scope=mine
    )
    rows, after = finish(list(await s.scalars(q)), page, lambda o: o.id)
    types = await _media_types(s, [o for o in rows if o.type == "asset"])
    listed = [{**_summary(o), "media_type": types.get(o.id)} for o in rows]
    return ObjectList.model_validate({"objects": listed, "next": after})


async def _media_types(s: AsyncSession, assets: list[WorkObject]) -> dict[str, str | None]:
    """The current version's media type of each asset (what the app names its kind by)."""
    if not assets:
        return {}
    current = {o.id: o.version for o in assets}
    rows = await s.execute(
        select(ObjectVersion.object_id, ObjectVersion.version, ObjectVersion.media_type).where(
            ObjectVersion.object_id.in_(current)
        )
    )
    return {oid: mt for oid, ver, mt in rows.all() if current[oid] == ver}


async def create(
    s: AsyncSession, assets: BlobStore, user_id: str, body: ObjectIn, max_upload_bytes: int
) -> ObjectSummary:
    if body.type == "asset":
        content, data, media_type = _asset_bytes(body.content, max_upload_bytes)
        provenance = {k: v for k, v in content.items() if k != "media_type"}
        o = await store.create_asset(
            s, assets, user_id, body.name, data, media_type, store.PERSON, provenance
        )
    else:
        o = await store.create_object(s, user_id, body.type, body.name, body.content, store.PERSON)
    summary = _summary(o)
    await append_event(
        s,
        user_id,
        EventType.OBJECT_VERSION,
        {**summary, "created_by": store.PERSON, "summary": "created"},
    )
    return ObjectSummary.model_validate(summary)


async def read(s: AsyncSession, user_id: str, object_id: str, version: int | None) -> ObjectView:
    o, v = await store.get_version(s, user_id, object_id, version)
    return ObjectView(
        object_id=o.id,
        type=o.type,
        name=o.name,
        version=v.version,
        current_version=o.version,
        content=v.content,
        created_by=v.created_by,
        created_at=v.created_at.isoformat(),
        task_ids=await store.task_ids_for(s, o.id),
    )


async def versions(s: AsyncSession, user_id: str, object_id: str, page: Page) -> VersionList:
    """The versions kept, oldest first: who made each, when, and what changed against the
    previous one."""
    o = await store.get_live(s, user_id, object_id)
    mine = select(ObjectVersion).where(ObjectVersion.object_id == o.id)
    q = by_number(mine, ObjectVersion.version, page)
    rows, after = finish(list(await s.scalars(q)), page, lambda v: str(v.version))
    goals = await _task_goals(s, user_id, [_task_of(v.created_by) for v in rows])
    return VersionList.model_validate(
        {
            "object_id": o.id,
            "next": after,
            "versions": [
                {
                    "version": v.version,
                    "created_by": v.created_by,
                    "created_at": v.created_at.isoformat(),
                    "summary": v.summary,
                    "task_id": _task_of(v.created_by),
                    "task_goal": goals.get(_task_of(v.created_by) or ""),
                }
                for v in rows
            ],
        }
    )


def _task_of(created_by: str) -> str | None:
    """`task:{task_id}:{call_id}` -> the task id; the person's versions have none."""
    kind, _, rest = created_by.partition(":")
    return (rest.split(":", 1)[0] or None) if kind == "task" else None


async def _task_goals(s: AsyncSession, user_id: str, ids: list[str | None]) -> dict[str, str]:
    wanted = {i for i in ids if i}
    if not wanted:
        return {}
    rows = await s.execute(
        select(Task.id, Task.goal).where(Task.id.in_(wanted), Task.user_id == user_id)
    )
    return {str(i): str(g) for i, g in rows.all()}


async def compare(
    s: AsyncSession, user_id: str, object_id: str, old: int | None, new: int | None
) -> ObjectDiff:
    """The lines that differ from version `old` (the one before `new` when not given) to
    version `new` (the current one when not given) of a document, or of a flow's nodes
    as JSON; assets have no lines."""
    o, b = await store.get_version(s, user_id, object_id, new)
    if o.type == "asset":
        raise InvalidInput("an asset's versions are files, not lines: open each to compare")
    _, a = await store.get_version(s, user_id, object_id, old or max(1, b.version - 1))
    d = diff.line_diff(diff.content_text(o.type, a.content), diff.content_text(o.type, b.content))
    return ObjectDiff.model_validate(
        {"object_id": o.id, "type": o.type, "from_version": a.version, "to_version": b.version, **d}
    )


async def write(
    s: AsyncSession,
    assets: BlobStore,
    user_id: str,
    object_id: str,
    body: WriteIn,
    max_upload_bytes: int,
) -> Written:
    """A whole new version on top of `base_version` (an asset's: new bytes)."""
    o = await store.get_live(s, user_id, object_id)
    content = body.content
    blob = None
    if o.type == "asset":
        content, data, media_type = _asset_bytes(content, max_upload_bytes)
        blob = (assets, data, media_type)
    w = await writes.write_object(
        s, user_id, object_id, body.base_version, content, store.PERSON, blob=blob
    )
    return Written.model_validate(w.view())


async def edit(s: AsyncSession, user_id: str, object_id: str, body: EditIn) -> Written:
    """A document's text edits, or a flow's node changes."""
    o = await store.get_live(s, user_id, object_id)
    if o.type == "document":
        edits = parse_edits(body.edits or [])
        w = await writes.edit_document(
            s, user_id, object_id, edits, store.PERSON, body.base_version
        )
    elif o.type == "flow":
        if body.base_version is None or body.nodes is None:
            raise InvalidInput("a flow edit needs base_version and nodes")
        w = await writes.edit_flow(
            s, user_id, object_id, body.base_version, body.nodes, store.PERSON
        )
    else:
        raise InvalidInput("assets are replaced with PUT, not edited")
    return Written.model_validate(w.view())


async def ask_to_delete(s: AsyncSession, user_id: str, object_id: str) -> CardRef:
    """Deletion is irreversible: it happens only when the person confirms the card."""
    card = await request_delete(s, user_id, object_id)
    return CardRef(card_id=card.id)


async def blob(
    s: AsyncSession, assets: BlobStore, user_id: str, object_id: str, version: int | None
) -> tuple[bytes, str | None]:
    """An asset version's bytes and media type."""
    _, v = await store.get_version(s, user_id, object_id, version)
    if not v.blob_path:
        raise NotFound(f"object {object_id} has no bytes")
    return await assets.get(v.blob_path), v.media_type

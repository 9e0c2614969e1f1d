"""Workspace data access, free of HTTP: objects, their versions, which tasks reference
which object, creation and deletion. Writes under optimistic concurrency are in
`workspace/writes.py`."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lomo import clock
from lomo.db.models import ObjectVersion, TaskObject, WorkObject
from lomo.errors import InvalidInput, NotFound
from lomo.events import append_event
from lomo.ids import new_id
from lomo.states import EventType
from workspace.blobs import AssetStore, BlobStore
from workspace.edits import validate_content
from workspace.errors import Deleted

__all__ = ["AssetStore", "BlobStore"]  # re-exported: other areas import them from here

OBJECT_TYPES = ("document", "flow", "asset")
PERSON = "user"


def task_author(task_id: str, call_id: str) -> str:
    return f"task:{task_id}:{call_id}"


def describe_author(created_by: str) -> str:
    if created_by == PERSON:
        return "the person"
    parts = created_by.split(":")
    return f"task {parts[1]}" if len(parts) > 1 else created_by


# --- reads ---------------------------------------------------------------------------


async def get_object(session: AsyncSession, user_id: str, object_id: str) -> WorkObject:
    """The object row, deleted or not (deleted ones still answer who/when)."""
    obj = await session.get(WorkObject, object_id, populate_existing=True)
    if obj is None or obj.user_id != user_id:
        raise NotFound(f"no object {object_id}")
    return obj


def _deleted(obj: WorkObject) -> Deleted:
    when = f" on {obj.deleted_at:%Y-%m-%d %H:%M} UTC" if obj.deleted_at else ""
    return Deleted(
        f"object {obj.id} ({obj.name}) was deleted by the person{when}; it cannot be read "
        "or changed any more",
        object_id=obj.id,
    )


async def get_live(session: AsyncSession, user_id: str, object_id: str) -> WorkObject:
    obj = await get_object(session, user_id, object_id)
    if obj.deleted:
        raise _deleted(obj)
    return obj


async def get_version(
    session: AsyncSession, user_id: str, object_id: str, version: int | None = None
) -> tuple[WorkObject, ObjectVersion]:
    obj = await get_live(session, user_id, object_id)
    ver = await session.get(ObjectVersion, (object_id, version or obj.version))
    if ver is None:
        raise NotFound(f"object {object_id} has no version {version}")
    return obj, ver


async def task_ids_for(session: AsyncSession, object_id: str) -> list[str]:
    rows = await session.scalars(
        select(TaskObject.task_id).where(TaskObject.object_id == object_id)
    )
    return list(rows)


async def version_by_call(session: AsyncSession, call_id: str) -> ObjectVersion | None:
    ver: ObjectVersion | None = await session.scalar(
        select(ObjectVersion).where(ObjectVersion.call_id == call_id)
    )
    return ver


# --- task references -----------------------------------------------------------------


async def link_task(
    session: AsyncSession,
    task_id: str,
    object_id: str,
    role: str = "reference",
    seen_version: int | None = None,
) -> TaskObject:
    """Record that `task_id` references the object (role `reference`: it read it, or
    `artifact`: it made a version of it); with `seen_version`, that it has seen that
    version. Safe under concurrent calls (parallel tool calls of one step): the row is
    inserted once, and `seen_version` only moves forward (an older read never undoes a newer)."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    await session.execute(
        insert(TaskObject)
        .values(task_id=task_id, object_id=object_id, role=role, seen_version=0)
        .on_conflict_do_nothing()
    )
    if role == "artifact":  # a task that wrote a version made (part of) this object
        await session.execute(
            update(TaskObject)
            .where(TaskObject.task_id == task_id, TaskObject.object_id == object_id)
            .where(TaskObject.role != "artifact")
            .values(role="artifact")
            .execution_options(synchronize_session=False)
        )
    if seen_version is not None:
        await session.execute(
            update(TaskObject)
            .where(TaskObject.task_id == task_id, TaskObject.object_id == object_id)
            .where(TaskObject.seen_version < seen_version)
            .values(seen_version=seen_version)
            .execution_options(synchronize_session=False)
        )
    link = await session.get(TaskObject, (task_id, object_id), populate_existing=True)
    assert link is not None
    return link


# --- creation ------------------------------------------------------------------------


async def create_object(
    session: AsyncSession,
    user_id: str,
    type_: str,
    name: str,
    content: dict[str, Any],
    created_by: str,
    task_id: str | None = None,
    call_id: str | None = None,
) -> WorkObject:
    """A new object at version 1 (the caller emits `object.version` if it wants one)."""
    if type_ not in OBJECT_TYPES:
        raise InvalidInput(f"type must be one of {', '.join(OBJECT_TYPES)}")
    content = validate_content(type_, content)
    obj = WorkObject(id=new_id("obj"), user_id=user_id, type=type_, name=name, version=1)
    session.add(obj)
    await session.flush()
    session.add(
        ObjectVersion(
            object_id=obj.id,
            version=1,
            content=content,
            created_by=created_by,
            call_id=call_id,
            summary="created",
        )
    )
    if task_id:
        await link_task(session, task_id, obj.id, role="artifact", seen_version=1)
    await session.flush()
    return obj


async def create_asset(
    session: AsyncSession,
    store: BlobStore,
    user_id: str,
    name: str,
    data: bytes,
    media_type: str,
    created_by: str,
    provenance: dict[str, Any],
    task_id: str | None = None,
) -> WorkObject:
    obj = await create_object(
        session,
        user_id,
        "asset",
        name,
        {"media_type": media_type, **provenance},
        created_by,
        task_id,
    )
    ver = await session.get(ObjectVersion, (obj.id, 1))
    assert ver is not None
    ver.blob_path = await store.put(obj.id, 1, data, media_type)
    ver.media_type = media_type
    await session.flush()
    return obj


# --- deletion ------------------------------------------------------------------------


async def mark_deleted(session: AsyncSession, user_id: str, object_id: str) -> bool:
    """Irreversible: the object is gone for every reader and its contents are wiped (bytes
    are removed after commit, `purge_blobs`). False if it was deleted already."""
    obj = await get_object(session, user_id, object_id)
    if obj.deleted:
        return False
    obj.deleted, obj.deleted_at = True, clock.now()
    for ver in await session.scalars(
        select(ObjectVersion).where(ObjectVersion.object_id == object_id)
    ):
        ver.content = {}
    await append_event(
        session, user_id, EventType.OBJECT_DELETED, {"object_id": obj.id, "name": obj.name}
    )
    return True


async def purge_blobs(session: AsyncSession, store: BlobStore, object_id: str) -> int:
    """Remove the bytes of a deleted object's versions; safe to run again."""
    obj = await session.get(WorkObject, object_id)
    if obj is None or not obj.deleted:
        return 0
    n = 0
    for ver in await session.scalars(
        select(ObjectVersion).where(
            ObjectVersion.object_id == object_id, ObjectVersion.blob_path.is_not(None)
        )
    ):
        assert ver.blob_path is not None
        await store.delete(ver.blob_path)
        ver.blob_path = None
        n += 1
    return n

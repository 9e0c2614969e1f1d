"""Workspace data access, free of HTTP. Blobs live in an asset directory (embedded mode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import ObjectVersion, TaskObject, WorkObject
from lomo.errors import Conflict, InvalidInput, NotFound
from lomo.ids import new_id

OBJECT_TYPES = ("document", "flow", "asset")
_EXT = {"image/png": "png", "video/mp4": "mp4", "image/gif": "gif", "audio/wav": "wav"}


class AssetStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, object_id: str, version: int, data: bytes, media_type: str) -> str:
        rel = f"{object_id}/v{version}.{_EXT.get(media_type, 'bin')}"
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)  # atomic: a reader never sees half a file
        return rel

    def get(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()


async def get_object(session: AsyncSession, user_id: str, object_id: str) -> WorkObject:
    obj = await session.get(WorkObject, object_id)
    if obj is None or obj.user_id != user_id:
        raise NotFound(f"no object {object_id}")
    return obj


async def get_version(
    session: AsyncSession, user_id: str, object_id: str, version: int | None = None
) -> tuple[WorkObject, ObjectVersion]:
    obj = await get_object(session, user_id, object_id)
    if obj.deleted:
        raise NotFound(f"object {object_id} was deleted")
    ver = await session.get(ObjectVersion, (object_id, version or obj.version))
    if ver is None:
        raise NotFound(f"object {object_id} has no version {version}")
    return obj, ver


async def create_object(
    session: AsyncSession,
    user_id: str,
    type_: str,
    name: str,
    content: dict[str, Any],
    created_by: str,
    task_id: str | None = None,
) -> WorkObject:
    if type_ not in OBJECT_TYPES:
        raise InvalidInput(f"type must be one of {', '.join(OBJECT_TYPES)}")
    obj = WorkObject(id=new_id("obj"), user_id=user_id, type=type_, name=name, version=1)
    session.add(obj)
    await session.flush()
    session.add(ObjectVersion(object_id=obj.id, version=1, content=content, created_by=created_by))
    if task_id:
        session.add(TaskObject(task_id=task_id, object_id=obj.id, role="artifact", seen_version=1))
    await session.flush()
    return obj


async def create_asset(
    session: AsyncSession,
    store: AssetStore,
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
    ver.blob_path = store.put(obj.id, 1, data, media_type)
    ver.media_type = media_type
    await session.flush()
    return obj


async def write_object(
    session: AsyncSession,
    user_id: str,
    object_id: str,
    base_version: int,
    content: dict[str, Any],
    created_by: str,
) -> WorkObject:
    """Full write with optimistic concurrency: refused unless based on the current version."""
    obj = await get_object(session, user_id, object_id)
    if obj.deleted:
        raise NotFound(f"object {object_id} was deleted")
    # Compare-and-set in one statement: of two writers on the same base, exactly one wins.
    won = await session.execute(
        update(WorkObject)
        .where(WorkObject.id == object_id, WorkObject.version == base_version)
        .values(version=base_version + 1)
        .execution_options(synchronize_session=False)
    )
    if won.rowcount != 1:  # type: ignore[attr-defined]
        await session.refresh(obj)
        raise Conflict(
            f"object {object_id} is at version {obj.version}, not {base_version}; re-read it",
            current_version=obj.version,
        )
    await session.refresh(obj)
    session.add(
        ObjectVersion(
            object_id=obj.id, version=base_version + 1, content=content, created_by=created_by
        )
    )
    await session.flush()
    return obj


async def task_ids_for(session: AsyncSession, object_id: str) -> list[str]:
    rows = await session.scalars(
        select(TaskObject.task_id).where(TaskObject.object_id == object_id)
    )
    return list(rows)

"""Writes under optimistic concurrency (docs/architecture.md#workspace).

Every write claims the next version with one `UPDATE objects SET version = version + 1`
as its first statement: the row lock (Postgres) or write lock (SQLite) serializes writers
of one object, so the version the write is checked against cannot move underneath it. A
refused write raises, and the transaction's rollback returns the claimed number. Writes
made by a tool call carry its `call_id`: the call's second attempt answers as the first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import ObjectVersion, WorkObject
from lomo.errors import InvalidInput, NotFound
from lomo.events import append_event
from lomo.states import EventType
from workspace.blobs import BlobStore
from workspace.diff import summarize_change
from workspace.edits import SnippetEdit, apply_snippet_edits, merge_flow, validate_content
from workspace.errors import VersionConflict
from workspace.store import describe_author, get_live, get_object, link_task, version_by_call


@dataclass
class Written:
    """The outcome of an accepted write (or of a replayed one: same call_id, same answer)."""

    object_id: str
    type: str
    name: str
    version: int
    base_version: int
    summary: str = ""
    others_changed: list[str] = field(default_factory=list)  # flows: nodes changed meanwhile
    replayed: bool = False

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "object_id": self.object_id,
            "type": self.type,
            "name": self.name,
            "version": self.version,
            "base_version": self.base_version,
            "summary": self.summary,
        }
        if self.type == "flow":
            out["others_changed"] = self.others_changed
        return out


# Given (current version number, its content), return the new content and the nodes other
# writers changed meanwhile; raise a Conflict to refuse (nothing is applied).
Compute = Callable[[int, dict[str, Any]], tuple[dict[str, Any], list[str]]]


async def _commit(
    session: AsyncSession,
    user_id: str,
    object_id: str,
    compute: Compute,
    created_by: str,
    call_id: str | None,
    task_id: str | None,
    blob: tuple[BlobStore, bytes, str] | None = None,
) -> Written:
    # Cheap check first: a retry after a committed write needs no lock at all.
    replay = await _replay(session, user_id, object_id, call_id)
    if replay is not None:
        return replay
    claimed = await session.scalar(
        update(WorkObject)
        .where(
            WorkObject.id == object_id,
            WorkObject.user_id == user_id,
            WorkObject.deleted.is_(False),
        )
        .values(version=WorkObject.version + 1)
        .returning(WorkObject.version)
    )
    if claimed is None:
        await get_live(session, user_id, object_id)  # raises NotFound or Deleted
        raise NotFound(f"no object {object_id}")
    # Again under the lock: a concurrent attempt of the same call may have committed while
    # this one waited; then give the claim back and answer as it did (never a refusal of
    # a change that did land).
    replay = await _replay(session, user_id, object_id, call_id)
    if replay is not None:
        await session.execute(
            update(WorkObject).where(WorkObject.id == object_id).values(version=claimed - 1)
        )
        return replay
    obj = await get_object(session, user_id, object_id)
    current = await session.get(ObjectVersion, (object_id, claimed - 1))
    assert current is not None
    content, others = compute(current.version, dict(current.content))
    summary = summarize_change(obj.type, current.content, content)
    ver = ObjectVersion(
        object_id=object_id,
        version=claimed,
        content=content,
        created_by=created_by,
        call_id=call_id,
        summary=summary,
    )
    if blob is not None:
        store, data, media_type = blob
        ver.blob_path = await store.put(object_id, claimed, data, media_type)
        ver.media_type = media_type
    session.add(ver)
    await session.flush()
    if task_id:
        await link_task(session, task_id, object_id, role="artifact", seen_version=claimed)
    await append_event(
        session,
        user_id,
        EventType.OBJECT_VERSION,
        {
            "object_id": object_id,
            "type": obj.type,
            "name": obj.name,
            "version": claimed,
            "created_by": created_by,
            "summary": summary,
        },
    )
    return Written(obj.id, obj.type, obj.name, claimed, current.version, summary, others)


async def _replay(
    session: AsyncSession, user_id: str, object_id: str, call_id: str | None
) -> Written | None:
    """The answer of this call's earlier write, if it made one (the same answer again)."""
    if not call_id:
        return None
    done = await version_by_call(session, call_id)
    if done is None:
        return None
    if done.object_id != object_id:
        raise InvalidInput(f"call {call_id} already wrote another object")
    obj = await get_object(session, user_id, object_id)
    return Written(
        obj.id, obj.type, obj.name, done.version, done.version - 1, done.summary, replayed=True
    )


async def _refusal_detail(
    session: AsyncSession, obj_type: str, object_id: str, base: int, current: int
) -> tuple[str, str]:
    """(who made the newer versions, what changed since `base`) for a refusal message."""
    rows = list(
        await session.scalars(
            select(ObjectVersion)
            .where(ObjectVersion.object_id == object_id)
            .where(ObjectVersion.version.in_([base, current]))
        )
    )
    by_v = {r.version: r for r in rows}
    authors = await session.scalars(
        select(ObjectVersion.created_by)
        .where(ObjectVersion.object_id == object_id)
        .where(ObjectVersion.version > base, ObjectVersion.version <= current)
    )
    who = ", ".join(sorted({describe_author(a) for a in authors})) or "someone"
    if base in by_v and current in by_v:
        return who, summarize_change(obj_type, by_v[base].content, by_v[current].content)
    return who, "unknown change"


def _stale(obj: WorkObject, base: int, current: int, who: str, what: str) -> VersionConflict:
    return VersionConflict(
        f"{obj.name} is at version {current}, not {base} (changed by {who}: {what}); "
        "re-read it and apply your change to the current version",
        current_version=current,
        changed=what,
    )


async def write_object(
    session: AsyncSession,
    user_id: str,
    object_id: str,
    base_version: int,
    content: dict[str, Any],
    created_by: str,
    *,
    call_id: str | None = None,
    task_id: str | None = None,
    blob: tuple[BlobStore, bytes, str] | None = None,
) -> Written:
    """Full write: refused (VersionConflict) unless based on the current version."""
    obj = await get_live(session, user_id, object_id)
    new = validate_content(obj.type, content)
    stale: list[int] = []

    def compute(current: int, _old: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        if current != base_version:
            stale.append(current)
            raise VersionConflict("stale")
        return new, []

    try:
        return await _commit(
            session, user_id, object_id, compute, created_by, call_id, task_id, blob
        )
    except VersionConflict:
        if not stale:
            raise
    # Refused: explain from the committed state (the claim is rolled back by the caller).
    who, what = await _refusal_detail(session, obj.type, object_id, base_version, stale[0])
    raise _stale(obj, base_version, stale[0], who, what)


async def edit_document(
    session: AsyncSession,
    user_id: str,
    object_id: str,
    edits: list[SnippetEdit],
    created_by: str,
    base_version: int | None = None,
    *,
    call_id: str | None = None,
    task_id: str | None = None,
) -> Written:
    """Snippet replacements on the current text, all-or-nothing (EditRefused names each
    failing snippet). With `base_version`, also refused if the document moved past it."""
    obj = await get_live(session, user_id, object_id)
    if obj.type != "document":
        raise InvalidInput(f"{object_id} is a {obj.type}, not a document")
    stale: list[int] = []

    def compute(current: int, old: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        if base_version is not None and current != base_version:
            stale.append(current)
            raise VersionConflict("stale")
        return {**old, "text": apply_snippet_edits(str(old.get("text", "")), edits)}, []

    try:
        return await _commit(session, user_id, object_id, compute, created_by, call_id, task_id)
    except VersionConflict:
        if not stale or base_version is None:
            raise
    who, what = await _refusal_detail(session, obj.type, object_id, base_version, stale[0])
    raise _stale(obj, base_version, stale[0], who, what)


async def edit_flow(
    session: AsyncSession,
    user_id: str,
    object_id: str,
    base_version: int,
    nodes: dict[str, Any],
    created_by: str,
    *,
    call_id: str | None = None,
    task_id: str | None = None,
) -> Written:
    """Node-level edit: refused (NodeConflict) only for named nodes changed since
    `base_version`; the accepted result names the other nodes changed meanwhile."""
    obj = await get_live(session, user_id, object_id)
    if obj.type != "flow":
        raise InvalidInput(f"{object_id} is a {obj.type}, not a flow")
    base = await session.get(ObjectVersion, (object_id, base_version))
    if base is None or base_version > obj.version:
        raise InvalidInput(f"{obj.name} has no version {base_version}")
    base_nodes = dict(base.content.get("nodes") or {})

    def compute(_current: int, old: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        merged = merge_flow(base_nodes, old.get("nodes") or {}, nodes)
        return {**old, "nodes": merged.nodes}, merged.others_changed

    return await _commit(session, user_id, object_id, compute, created_by, call_id, task_id)

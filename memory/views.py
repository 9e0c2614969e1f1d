"""JSON shapes of the memory API (docs/api.md#routes); reads SQL only."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.pages import Page, by_creation, by_number, cut
from lomo.errors import NotFound
from memory.chains import latest_profile
from memory.models import Evidence, Memory, MemoryLink, MemoryVersion

SCOPES = ("profile", "project", "task")


async def _sources(s: AsyncSession, version_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if not version_ids:
        return out
    rows = await s.execute(
        select(MemoryLink.target_id, MemoryLink.source_id, MemoryLink.relation, Evidence)
        .join(Evidence, Evidence.id == MemoryLink.source_id)
        .where(MemoryLink.target_id.in_(version_ids))
        .order_by(MemoryLink.id)
    )
    for target, source, relation, ev in rows.all():
        out[target].append(
            {
                "evidence_id": source,
                "relation": relation,
                "source": ev.source,
                "message_id": ev.message_id,
                "usable": ev.usable,
            }
        )
    return out


def _version(m: Memory, v: MemoryVersion, sources: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "memory_id": m.id,
        "kind": m.kind,
        "scope": m.scope,
        "task_id": m.task_id,
        "subject": m.subject,
        "attribute": m.attribute,
        "content": v.content,
        "version": v.version,
        "version_id": v.id,
        "relation": v.relation,
        "status": v.status,
        "sources": sources,
        "valid_from": v.valid_from.isoformat(),
    }
    if v.valid_to is not None:
        out["valid_to"] = v.valid_to.isoformat()
    return out


async def list_memories(
    s: AsyncSession, user_id: str, scope: str | None, page: Page
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the active memories, oldest first, and the key of the last one shown
    when more follow (None on the last page)."""
    q = (
        select(Memory, MemoryVersion)
        .join(MemoryVersion, MemoryVersion.memory_id == Memory.id)
        .where(
            Memory.user_id == user_id,
            Memory.status == "active",
            MemoryVersion.status == "active",
        )
    )
    if scope:
        q = q.where(Memory.scope == scope)
    mine = [Memory.user_id == user_id]
    q = await by_creation(s, q, Memory.created_at, Memory.id, page, descending=False, scope=mine)
    rows, more = cut((await s.execute(q)).all(), page)
    sources = await _sources(s, [v.id for _, v in rows])
    shown = [_version(m, v, sources[v.id]) for m, v in rows]
    return shown, (rows[-1][0].id if more and rows else None)


async def history(s: AsyncSession, user_id: str, memory_id: str, page: Page) -> dict[str, Any]:
    """One page of the version chain, oldest first; `next_version`: the last version shown
    when more follow (None on the last page)."""
    memory = await s.get(Memory, memory_id)
    if memory is None or memory.user_id != user_id:
        raise NotFound(f"no memory {memory_id}")
    q = by_number(
        select(MemoryVersion).where(MemoryVersion.memory_id == memory_id),
        MemoryVersion.version,
        page,
    )
    versions, more = cut(list(await s.scalars(q)), page)
    sources = await _sources(s, [v.id for v in versions])
    return {
        "memory_id": memory.id,
        "status": memory.status,
        "current_version": memory.current_version,
        "versions": [_version(memory, v, sources[v.id]) for v in versions],
        "next_version": versions[-1].version if more and versions else None,
    }


async def profile(s: AsyncSession, user_id: str) -> dict[str, Any]:
    snap = await latest_profile(s, user_id)
    if snap is None:
        return {"version": 0, "items": []}
    return {"version": snap.version, "items": snap.items, "created_at": snap.created_at.isoformat()}

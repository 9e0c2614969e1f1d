"""Applying judged candidates: version chains, suppression, summaries and the profile.

    no memory for (kind, scope, task, subject, attribute)  → new memory, v1 (ORIGIN)
    same value / operation confirm                         → CONFIRM link, no new version
    operation refine                                       → v(n+1) (REFINE), v(n) SUPERSEDED,
                                                             v(n) → v(n+1) DERIVED
    a new value (operation new/change)                     → v(n+1) (CHANGE), v(n) SUPERSEDED
                                                             with valid_to (both kept in time)
    a person's correction                                  → v(n+1) (CORRECT)

Supersession happens only within the same subject and attribute (and kind, scope, task),
so unrelated facts never retire each other; an inferred candidate never changes a stated
memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.ids import new_id
from memory.candidates import Candidate
from memory.models import (
    Evidence,
    Memory,
    MemoryLink,
    MemoryVersion,
    ProfileSnapshot,
    Summary,
    Suppression,
)
from memory.text import normalize, text_hash, tokens


@dataclass
class Applied:
    outcome: str  # ORIGIN | REFINE | CONFIRM | CHANGE | CORRECT | dropped
    reason: str = "ok"
    memory_id: str | None = None
    version_id: str | None = None


@dataclass
class Touched:
    """Rows an operation changed: vectors to sync, summaries/profile to rebuild."""

    version_ids: set[str] = field(default_factory=set)
    task_ids: set[str | None] = field(default_factory=set)


async def find_memory(
    s: AsyncSession, user_id: str, kind: str, scope: str, task_id: str | None, subj: str, attr: str
) -> Memory | None:
    q = select(Memory).where(
        Memory.user_id == user_id,
        Memory.kind == kind,
        Memory.scope == scope,
        Memory.subject == subj,
        Memory.attribute == attr,
        Memory.status == "active",
    )
    q = q.where(Memory.task_id == task_id) if scope == "task" else q
    return await s.scalar(q.order_by(Memory.created_at.desc()).limit(1))


async def current_version(s: AsyncSession, memory: Memory) -> MemoryVersion:
    v = await s.scalar(
        select(MemoryVersion).where(
            MemoryVersion.memory_id == memory.id, MemoryVersion.version == memory.current_version
        )
    )
    if v is None:
        raise LookupError(f"memory {memory.id} has no version {memory.current_version}")
    return v


async def link(
    s: AsyncSession, user_id: str, src_kind: str, src: str, dst_kind: str, dst: str, rel: str
) -> None:
    exists = await s.scalar(
        select(MemoryLink.id).where(
            MemoryLink.source_id == src, MemoryLink.target_id == dst, MemoryLink.relation == rel
        )
    )
    if exists is None:
        s.add(
            MemoryLink(
                user_id=user_id,
                source_kind=src_kind,
                source_id=src,
                target_kind=dst_kind,
                target_id=dst,
                relation=rel,
            )
        )


async def suppressed(s: AsyncSession, user_id: str, evidence: Evidence, cand: Candidate) -> bool:
    """Forgotten content comes back only when the person states it anew (explicitly)."""
    rows = list(
        await s.scalars(
            select(Suppression).where(
                Suppression.user_id == user_id, Suppression.lifted_by.is_(None)
            )
        )
    )
    hit = [r for r in rows if _matches(r, evidence, cand)]
    if hit and cand.explicit:
        for r in hit:
            r.lifted_by = evidence.id
        return False
    return bool(hit)


def _matches(r: Suppression, evidence: Evidence, cand: Candidate) -> bool:
    if r.text_hash and r.text_hash == text_hash(evidence.text):
        return True
    if r.subject == cand.subject and r.attribute == cand.attribute:
        forgotten = frozenset(r.value.split())
        return bool(forgotten) and forgotten <= tokens(cand.value)
    return False


async def _new_version(
    s: AsyncSession,
    memory: Memory,
    cand_content: str,
    value: str,
    relation: str,
    now: datetime,
    valid_from: datetime | None = None,
) -> MemoryVersion:
    # After a forget the highest numbers may belong to deleted versions: never reuse them.
    top = await s.scalar(
        select(func.max(MemoryVersion.version)).where(MemoryVersion.memory_id == memory.id)
    )
    memory.current_version = (top or 0) + 1
    v = MemoryVersion(
        id=new_id("mv"),
        memory_id=memory.id,
        user_id=memory.user_id,
        version=memory.current_version,
        content=cand_content,
        value=value,
        relation=relation,
        status="active",
        valid_from=valid_from or now,
        created_at=now,
    )
    memory.updated_at = now
    s.add(v)
    await s.flush()
    return v


async def apply_candidate(
    s: AsyncSession,
    evidence: Evidence,
    cand: Candidate,
    now: datetime,
    touched: Touched,
    correction_of: Memory | None = None,
) -> Applied:
    user_id = evidence.user_id
    task_id = evidence.task_id if cand.scope == "task" else None
    if correction_of is None and await suppressed(s, user_id, evidence, cand):
        return Applied("dropped", "suppressed")
    if cand.kind == "inferred":
        stated = await find_memory(
            s, user_id, "stated", cand.scope, task_id, cand.subject, cand.attribute
        )
        if stated is not None:
            return Applied("dropped", "inferred_cannot_change_stated", stated.id)
    memory = correction_of or await find_memory(
        s, user_id, cand.kind, cand.scope, task_id, cand.subject, cand.attribute
    )
    touched.task_ids.add(evidence.task_id)
    if memory is None:
        memory = Memory(
            id=new_id("mem"),
            user_id=user_id,
            kind=cand.kind,
            scope=cand.scope,
            task_id=task_id,
            subject=cand.subject,
            attribute=cand.attribute,
            current_version=1,
            status="active",
            created_at=now,
            updated_at=now,
        )
        s.add(memory)
        await s.flush()
        v = await _new_version(s, memory, cand.content, cand.value, "ORIGIN", now)
        await link(s, user_id, "evidence", evidence.id, "version", v.id, "ORIGIN")
        await _derive_from_related(s, cand, v, [])
        touched.version_ids.add(v.id)
        return Applied("ORIGIN", memory_id=memory.id, version_id=v.id)
    old = await current_version(s, memory)
    same = normalize(old.value) == normalize(cand.value)
    if correction_of is None and (cand.operation == "confirm" or same):
        await link(s, user_id, "evidence", evidence.id, "version", old.id, "CONFIRM")
        return Applied("CONFIRM", memory_id=memory.id, version_id=old.id)
    if correction_of is not None:
        relation = "CORRECT"
    else:
        relation = "REFINE" if cand.operation == "refine" else "CHANGE"
    old.status = "superseded"
    if relation in ("CHANGE", "CORRECT"):
        old.valid_to = now  # the old value held until now; both stay in the history
    v = await _new_version(
        s,
        memory,
        cand.content,
        cand.value,
        relation,
        now,
        valid_from=old.valid_from if relation == "REFINE" else now,
    )
    await link(s, user_id, "evidence", evidence.id, "version", v.id, relation)
    if relation == "REFINE":
        # The refined content merges the old one: forgetting the old must reach the new.
        await link(s, user_id, "version", old.id, "version", v.id, "DERIVED")
    if relation != "CORRECT":  # a correction is the person's own words, derived from nothing
        await _derive_from_related(s, cand, v, [old])
    touched.version_ids.update({old.id, v.id})
    return Applied(relation, memory_id=memory.id, version_id=v.id)


async def _derive_from_related(
    s: AsyncSession, cand: Candidate, v: MemoryVersion, also: list[MemoryVersion]
) -> None:
    """Content the model built can carry words of another version about the same subject and
    attribute (another scope, another kind, the value it replaced): link those as sources,
    so forgetting them reaches this version too. Over-linking only ever forgets more."""
    related = list(
        await s.scalars(
            select(MemoryVersion)
            .join(Memory, Memory.id == MemoryVersion.memory_id)
            .where(
                Memory.user_id == v.user_id,
                Memory.subject == cand.subject,
                Memory.attribute == cand.attribute,
                MemoryVersion.status == "active",
                MemoryVersion.id != v.id,
            )
        )
    )
    words = tokens(cand.value) | tokens(cand.content)
    for other in [*related, *also]:
        if tokens(other.value) & words:
            await link(s, v.user_id, "version", other.id, "version", v.id, "DERIVED")


async def rebuild_summary(s: AsyncSession, user_id: str, task_id: str, now: datetime) -> None:
    """The task's episodic summary, rebuilt from the active versions its messages made."""
    for old in await s.scalars(
        select(Summary).where(
            Summary.user_id == user_id, Summary.task_id == task_id, Summary.status == "active"
        )
    ):
        old.status = "replaced"
    rows = (
        await s.execute(
            select(MemoryVersion)
            .join(MemoryLink, MemoryLink.target_id == MemoryVersion.id)
            .join(Evidence, Evidence.id == MemoryLink.source_id)
            .where(
                Evidence.task_id == task_id,
                Evidence.user_id == user_id,
                Evidence.usable.is_(True),
                MemoryVersion.status == "active",
            )
            .order_by(MemoryVersion.created_at)
        )
    ).scalars()
    versions = list(dict.fromkeys(rows))
    if not versions:
        return
    summary = Summary(
        id=new_id("sum"),
        user_id=user_id,
        task_id=task_id,
        status="active",
        created_at=now,
        text="In this task: " + " ".join(v.content for v in versions),
    )
    s.add(summary)
    await s.flush()
    for v in versions:
        await link(s, user_id, "version", v.id, "summary", summary.id, "DERIVED")


async def latest_profile(s: AsyncSession, user_id: str) -> ProfileSnapshot | None:
    return await s.scalar(
        select(ProfileSnapshot)
        .where(ProfileSnapshot.user_id == user_id)
        .order_by(ProfileSnapshot.version.desc())
        .limit(1)
    )


async def rebuild_profile(
    s: AsyncSession, user_id: str, limit: int, reason: str, force: bool = False
) -> ProfileSnapshot | None:
    """A new profile version when its items changed (or `force`); else None."""
    rows = await s.execute(
        select(Memory, MemoryVersion)
        .join(MemoryVersion, MemoryVersion.memory_id == Memory.id)
        .where(
            Memory.user_id == user_id,
            Memory.scope == "profile",
            Memory.kind == "stated",
            Memory.status == "active",
            MemoryVersion.status == "active",
        )
        .order_by(Memory.created_at)
        .limit(limit)
    )
    items = [
        {"memory_id": m.id, "version_id": v.id, "version": v.version, "content": v.content}
        for m, v in rows.all()
    ]
    last = await latest_profile(s, user_id)
    if last is not None and not force and last.items == items:
        return None
    if last is None and not items and not force:
        return None
    snap = ProfileSnapshot(
        user_id=user_id, version=(last.version if last else 0) + 1, items=items, reason=reason
    )
    s.add(snap)
    await s.flush()
    return snap

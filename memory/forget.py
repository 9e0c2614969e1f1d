"""Forgetting that really forgets (docs/architecture.md#memory).

    evidence made unusable → versions, summaries reachable over derivation links deleted
    and emptied (CONFIRM links only detached) → versions that did not depend on it stay;
    a chain whose current version died falls back to its latest surviving version →
    the remaining evidence of deleted versions is replayed (re-derivation), with a
    suppression so the forgotten content is not extracted again → summaries rebuilt,
    old profile snapshots scrubbed, task goals, segment summaries and stored contexts that
    quoted it scrubbed (memory/scrub.py), profile version bumped → vectors deleted (caller,
    after commit) → agent outputs that used deleted versions are excluded (memory/context.py).

Idempotent per forget id (the card id): a retry returns the recorded result, so the
caller can repeat the vector work safely.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo import clock
from lomo.errors import InvalidInput, NotFound
from memory.candidates import Candidate
from memory.chains import Touched, apply_candidate
from memory.extraction import finish
from memory.models import (
    Evidence,
    ForgetRecord,
    Memory,
    MemoryLink,
    MemoryVersion,
    ProfileSnapshot,
    Summary,
    Suppression,
)
from memory.scrub import scrub_quotes
from memory.text import text_hash, tokens

_REPLAYABLE = ("ORIGIN", "REFINE", "CONFIRM", "CHANGE", "CORRECT")


@dataclass
class ForgetResult:
    forget_id: str
    evidence_ids: list[str] = field(default_factory=list)
    deleted_version_ids: list[str] = field(default_factory=list)
    version_ids_to_sync: list[str] = field(default_factory=list)
    deleted_memory_ids: list[str] = field(default_factory=list)
    profile_version: int | None = None


def reachable(
    links: Iterable[tuple[str, str, str]], start: Iterable[str]
) -> tuple[set[str], set[tuple[str, str, str]]]:
    """Nodes that depend on `start` over (source, target, relation) links, and the CONFIRM
    links leaving the forgotten evidence (to detach). CONFIRM is provenance only: the
    confirmed version stands on its own evidence, so it is not followed."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for src, dst, rel in links:
        out[src].append((dst, rel))
    seen: set[str] = set(start)
    start_set = set(seen)
    detach: set[tuple[str, str, str]] = set()
    queue = deque(seen)
    while queue:
        node = queue.popleft()
        for dst, rel in out[node]:
            if rel == "CONFIRM":
                if node in start_set:
                    detach.add((node, dst, rel))
                continue
            if dst not in seen:
                seen.add(dst)
                queue.append(dst)
    return seen - start_set, detach


async def resolve_evidence(
    s: AsyncSession, user_id: str, memory_id: str | None, text: str | None
) -> list[Evidence]:
    """What to forget: every piece of evidence of a memory's chain, or every piece of evidence
    whose text (or whose memory's content) contains the given words."""
    ids: set[str] = set()
    if memory_id:
        memory = await s.get(Memory, memory_id)
        if memory is None or memory.user_id != user_id:
            raise NotFound(f"no memory {memory_id}")
        version_ids = list(
            await s.scalars(select(MemoryVersion.id).where(MemoryVersion.memory_id == memory_id))
        )
        ids |= set(
            await s.scalars(
                select(MemoryLink.source_id).where(
                    MemoryLink.target_id.in_(version_ids), MemoryLink.source_kind == "evidence"
                )
            )
        )
    if text:
        # People paraphrase what they want forgotten ("our brand colour is blue" for "our
        # brand's main colour is blue"): every content word of the request must occur.
        needle = tokens(text)
        if not needle:
            raise InvalidInput("text has no words to forget")
        for ev in await s.scalars(select(Evidence).where(Evidence.user_id == user_id)):
            if needle <= tokens(ev.text):
                ids.add(ev.id)
        for v in await s.scalars(
            select(MemoryVersion).where(
                MemoryVersion.user_id == user_id, MemoryVersion.status != "deleted"
            )
        ):
            if needle <= tokens(v.content):
                ids |= set(
                    await s.scalars(
                        select(MemoryLink.source_id).where(
                            MemoryLink.target_id == v.id,
                            MemoryLink.source_kind == "evidence",
                            MemoryLink.relation != "CONFIRM",
                        )
                    )
                )
    if not ids:
        return []
    return list(await s.scalars(select(Evidence).where(Evidence.id.in_(sorted(ids)))))


def _suppressions(user_id: str, forget_id: str, ev: Evidence) -> list[Suppression]:
    rows = [Suppression(user_id=user_id, forget_id=forget_id, text_hash=text_hash(ev.text))]
    for entry in ev.candidates or []:
        cand = entry.get("candidate") or {}
        if entry.get("outcome") != "dropped" and cand.get("subject") and cand.get("value"):
            rows.append(
                Suppression(
                    user_id=user_id,
                    forget_id=forget_id,
                    subject=cand["subject"],
                    attribute=cand.get("attribute", ""),
                    value=" ".join(sorted(tokens(cand["value"]))),
                )
            )
    return rows


def _replayable(entry: dict[str, Any]) -> Candidate | None:
    if entry.get("outcome") not in _REPLAYABLE:
        return None
    c = entry.get("candidate") or {}
    try:
        return Candidate(**c)
    except TypeError:
        return None


async def forget(
    s: AsyncSession,
    user_id: str,
    forget_id: str,
    memory_id: str | None,
    text: str | None,
    profile_limit: int,
) -> ForgetResult:
    done = await s.get(ForgetRecord, forget_id)
    if done is not None:
        return _recorded(done)
    now = clock.now()
    evidence = await resolve_evidence(s, user_id, memory_id, text)
    forgotten = {ev.id for ev in evidence}
    links = list(await s.scalars(select(MemoryLink).where(MemoryLink.user_id == user_id)))
    dependents, detach = reachable(
        ((ln.source_id, ln.target_id, ln.relation) for ln in links), forgotten
    )
    await _make_unusable(s, user_id, forget_id, evidence, detach, now)
    touched = Touched()
    deleted_ids, affected_memories = await _delete_dependents(s, dependents, now, touched)
    deleted_memories = await _fall_back(s, affected_memories, now, touched)
    await _scrub_profiles(s, user_id, deleted_ids)
    await scrub_quotes(s, user_id, evidence, text, now, deleted_ids)
    await s.flush()
    await _rederive(s, _replay_ids(links, deleted_ids, forgotten), forget_id, now, touched)
    profile_version = await finish(
        s,
        user_id,
        touched,
        profile_limit,
        "forget",
        now,
        {"forget_id": forget_id, "memory_ids": sorted(affected_memories)},
        force_profile=bool(deleted_ids),
    )
    s.add(
        ForgetRecord(
            id=forget_id,
            user_id=user_id,
            request={"memory_id": memory_id, "text": text},
            evidence_ids=sorted(forgotten),
            deleted_version_ids=sorted(deleted_ids),
            rederived_version_ids=sorted(touched.version_ids - deleted_ids),
            profile_version=profile_version or 0,
        )
    )
    return ForgetResult(
        forget_id,
        sorted(forgotten),
        sorted(deleted_ids),
        sorted(touched.version_ids),
        sorted(deleted_memories),
        profile_version,
    )


def _recorded(done: ForgetRecord) -> ForgetResult:
    """The result of a forget that already ran: the vector work to repeat covers the deleted
    and the re-derived versions; the memories that went are gone already."""
    return ForgetResult(
        done.id,
        list(done.evidence_ids),
        list(done.deleted_version_ids),
        sorted({*done.deleted_version_ids, *done.rederived_version_ids}),
        [],
        done.profile_version,
    )


async def _make_unusable(
    s: AsyncSession,
    user_id: str,
    forget_id: str,
    evidence: list[Evidence],
    detach: set[tuple[str, str, str]],
    now: datetime,
) -> None:
    """The evidence can no longer be used nor extracted again, and the versions it only
    confirmed lose the link to it."""
    for ev in evidence:
        if ev.usable:
            ev.usable = False
            ev.forgotten_at = now
        s.add_all(_suppressions(user_id, forget_id, ev))
    for src, dst, rel in detach:
        await s.execute(
            delete(MemoryLink).where(
                MemoryLink.source_id == src, MemoryLink.target_id == dst, MemoryLink.relation == rel
            )
        )


async def _delete_dependents(
    s: AsyncSession, dependents: set[str], now: datetime, touched: Touched
) -> tuple[set[str], set[str]]:
    """Delete and empty the versions and summaries derived from the forgotten evidence.
    Returns the deleted version ids and the memories they belong to."""
    versions = list(
        await s.scalars(select(MemoryVersion).where(MemoryVersion.id.in_(sorted(dependents))))
    )
    affected_memories: set[str] = set()
    for v in versions:
        if v.status != "deleted":
            v.status, v.content, v.value, v.deleted_at = "deleted", "", "", now
        affected_memories.add(v.memory_id)
        touched.version_ids.add(v.id)
    summaries = list(await s.scalars(select(Summary).where(Summary.id.in_(sorted(dependents)))))
    for summary in summaries:
        summary.status, summary.text = "deleted", ""
        touched.task_ids.add(summary.task_id)
    return {v.id for v in versions}, affected_memories


def _replay_ids(links: list[MemoryLink], deleted_ids: set[str], forgotten: set[str]) -> set[str]:
    """The evidence behind the deleted versions that was not itself forgotten."""
    return {
        ln.source_id for ln in links if ln.target_id in deleted_ids and ln.source_kind == "evidence"
    } - forgotten


async def _rederive(
    s: AsyncSession, replay_ids: set[str], forget_id: str, now: datetime, touched: Touched
) -> None:
    """Replay the still-usable evidence of deleted versions in time order, noting on each
    piece of evidence what its candidates became."""
    if not replay_ids:
        return
    for ev in await s.scalars(
        select(Evidence)
        .where(Evidence.id.in_(sorted(replay_ids)), Evidence.usable.is_(True))
        .order_by(Evidence.created_at)
    ):
        notes: list[dict[str, Any]] = []
        for entry in ev.candidates or []:
            cand = _replayable(entry)
            if cand is not None:
                applied = await apply_candidate(s, ev, cand, now, touched)
                notes.append(
                    {
                        "forget_id": forget_id,
                        "outcome": applied.outcome,
                        "reason": applied.reason,
                        "version_id": applied.version_id,
                    }
                )
        ev.candidates = [*ev.candidates, {"rederived": notes}]


async def _fall_back(
    s: AsyncSession, memory_ids: set[str], now: datetime, touched: Touched
) -> set[str]:
    """A chain whose current version died: the latest survivor holds again, or the memory
    is gone. Returns the memories that are gone. A version the person corrected is wrong by
    their own word: forgetting the correction never brings it back."""
    gone: set[str] = set()
    for memory in await s.scalars(select(Memory).where(Memory.id.in_(sorted(memory_ids)))):
        chain = list(
            await s.scalars(
                select(MemoryVersion)
                .where(MemoryVersion.memory_id == memory.id)
                .order_by(MemoryVersion.version.desc())
            )
        )
        corrected_below = max((v.version for v in chain if v.relation == "CORRECT"), default=0)
        survivors = [v for v in chain if v.status != "deleted" and v.version >= corrected_below]
        memory.updated_at = now
        if not survivors:
            memory.status = "deleted"
            gone.add(memory.id)
            continue
        if not any(v.status == "active" for v in survivors):
            latest = survivors[0]
            latest.status, latest.valid_to = "active", None
            memory.current_version = latest.version
            touched.version_ids.add(latest.id)
    return gone


async def _scrub_profiles(s: AsyncSession, user_id: str, deleted: set[str]) -> None:
    """Old snapshots keep their version numbers but lose forgotten items' content."""
    if not deleted:
        return
    for snap in await s.scalars(select(ProfileSnapshot).where(ProfileSnapshot.user_id == user_id)):
        kept = [i for i in snap.items if i.get("version_id") not in deleted]
        if len(kept) != len(snap.items):
            snap.items = kept

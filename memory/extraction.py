"""Extraction after a message: evidence row, one model call, each candidate judged alone."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from llm.types import ModelProvider
from lomo import clock
from lomo.db.engine import Database
from lomo.db.models import MessageRow
from lomo.errors import ModelOutputError, NotFound
from lomo.events import append_event
from lomo.ids import new_id
from lomo.states import EventType
from memory.candidates import build_request, judge, raw_candidates
from memory.chains import Applied, Touched, apply_candidate, rebuild_profile, rebuild_summary
from memory.models import Evidence, Memory, MemoryLink, MemoryVersion

log = logging.getLogger(__name__)


@dataclass
class ExtractionResult:
    evidence_id: str
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    version_ids: list[str] = field(default_factory=list)  # vectors to sync
    skipped: str | None = None


async def active_memories(
    s: AsyncSession, user_id: str, task_id: str | None
) -> list[dict[str, str]]:
    rows = await s.execute(
        select(Memory, MemoryVersion)
        .join(MemoryVersion, MemoryVersion.memory_id == Memory.id)
        .where(
            Memory.user_id == user_id,
            Memory.status == "active",
            MemoryVersion.status == "active",
        )
        .order_by(Memory.created_at)
    )
    return [
        {
            "memory_id": m.id,
            "subject": m.subject,
            "attribute": m.attribute,
            "value": v.value,
            "kind": m.kind,
            "scope": m.scope,
            "content": v.content,
        }
        for m, v in rows.all()
        if m.scope != "task" or m.task_id == task_id
    ]


async def evidence_for_message(s: AsyncSession, user_id: str, message_id: str) -> Evidence:
    ev = await s.scalar(
        select(Evidence).where(
            Evidence.user_id == user_id,
            Evidence.source == "message",
            Evidence.source_ref == message_id,
        )
    )
    if ev is not None:
        return ev
    msg = await s.get(MessageRow, message_id)
    if msg is None or msg.user_id != user_id:
        raise NotFound(f"no message {message_id}")
    ev = Evidence(
        id=new_id("evd"),
        user_id=user_id,
        source="message",
        source_ref=message_id,
        message_id=message_id,
        task_id=msg.task_id,
        text=msg.text,
        usable=True,
        candidates=[],
    )
    s.add(ev)
    await s.flush()
    return ev


async def linked_versions(s: AsyncSession, evidence_id: str) -> list[str]:
    """Every version of every memory this evidence touched: on a retry the index must also
    lose the versions the first attempt superseded."""
    targets = select(MemoryLink.target_id).where(MemoryLink.source_id == evidence_id)
    memories = select(MemoryVersion.memory_id).where(MemoryVersion.id.in_(targets))
    return list(
        await s.scalars(select(MemoryVersion.id).where(MemoryVersion.memory_id.in_(memories)))
    )


async def apply_judged(
    s: AsyncSession,
    ev: Evidence,
    raws: list[Any],
    now: datetime,
    touched: Touched,
) -> list[dict[str, Any]]:
    """Judge and apply each candidate in its own savepoint: one failure drops only itself."""
    outcomes: list[dict[str, Any]] = []
    for raw in raws:
        judged = judge(raw, ev.text)
        entry: dict[str, Any] = {
            "candidate": judged.raw,
            "outcome": "dropped",
            "reason": judged.reason,
        }
        if judged.candidate is not None:
            entry["candidate"] = judged.candidate.to_dict()
            try:
                async with s.begin_nested():
                    applied: Applied = await apply_candidate(s, ev, judged.candidate, now, touched)
                entry.update(
                    outcome=applied.outcome,
                    reason=applied.reason,
                    memory_id=applied.memory_id,
                    version_id=applied.version_id,
                )
            except Exception as e:  # one candidate's DB failure must not take the others
                log.warning("memory candidate failed on %s: %s", ev.id, e)
                entry.update(outcome="dropped", reason=f"apply_failed: {type(e).__name__}")
        outcomes.append(entry)
    return outcomes


async def finish(
    s: AsyncSession,
    user_id: str,
    touched: Touched,
    profile_limit: int,
    reason: str,
    now: datetime,
    event: dict[str, Any],
    force_profile: bool = False,
) -> int | None:
    for task_id in sorted(t for t in touched.task_ids if t):
        await rebuild_summary(s, user_id, task_id, now)
    snap = await rebuild_profile(s, user_id, profile_limit, reason, force=force_profile)
    if touched.version_ids or snap is not None:
        await append_event(
            s,
            user_id,
            EventType.MEMORY_CHANGED,
            {**event, "profile_version": snap.version if snap else None},
        )
    return snap.version if snap else None


async def extract_message(
    db: Database, provider: ModelProvider, user_id: str, message_id: str, profile_limit: int
) -> ExtractionResult:
    async with db.session() as s:
        ev = await evidence_for_message(s, user_id, message_id)
        if ev.extracted_at is not None or not ev.usable:
            # Done before (a retry or duplicate signal): only the vectors may need repair.
            return ExtractionResult(
                ev.id, ev.candidates, await linked_versions(s, ev.id), skipped="already_extracted"
            )
        memories = await active_memories(s, user_id, ev.task_id)
        text = ev.text
    response = await provider.complete(build_request(text, memories))
    raws = raw_candidates(response)
    if raws is None:
        raise ModelOutputError(f"extraction for {message_id} returned no candidate list")
    now = clock.now()
    touched = Touched()
    async with db.session() as s:
        ev = await s.get(Evidence, ev.id, with_for_update=True) or ev
        if ev.extracted_at is not None:
            return ExtractionResult(ev.id, ev.candidates, await linked_versions(s, ev.id), "raced")
        # Write first: the savepoints below then nest inside one real transaction (SQLite).
        ev.extracted_at = now
        await s.flush()
        outcomes = await apply_judged(s, ev, raws, now, touched)
        ev.candidates = outcomes
        await finish(
            s,
            user_id,
            touched,
            profile_limit,
            "extraction",
            now,
            {
                "evidence_id": ev.id,
                "message_id": message_id,
                "memory_ids": sorted({o["memory_id"] for o in outcomes if o.get("memory_id")}),
            },
        )
    return ExtractionResult(ev.id, outcomes, sorted(touched.version_ids))

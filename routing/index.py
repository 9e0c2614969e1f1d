"""The task index: compact rows per task, kept fresh lazily, searched three ways.

Refresh happens inside the routing activity for tasks whose `tasks.updated_at` is newer
than their entry, so a status change costs no extra activity. Candidates are the most
recently active tasks (archived ones excluded) plus keyword and vector hits over the whole
index (archived included): the number of tasks changes the search space, not the context.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, insert, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo import clock
from lomo.db.models import MessageRow, Task, TaskObject, WorkObject
from routing.models import TaskIndexEntry, TaskIndexTerm
from routing.text import content_terms
from vectors.base import VectorIndex, VectorPoint
from vectors.embeddings import Embedder

log = logging.getLogger(__name__)

ACTIVE_STATUSES = ("running", "waiting_generation", "waiting_user", "paused")
REFRESH_BATCH = 200  # stale entries refreshed per routing call (bounds one activity's work)
MAX_OBJECT_REFS = 4
NEVER = datetime(1970, 1, 1, tzinfo=UTC)  # an entry refreshed "never": stale for any task


@dataclass
class Candidate:
    task_id: str
    kind: str
    status: str
    goal: str
    summary: str
    language: str
    object_refs: list[dict[str, Any]]
    last_active_at: datetime
    keyword_hits: int = 0
    similarity: float | None = None
    sources: list[str] = field(default_factory=list)  # "recent" | "keyword" | "vector"


def _candidate(e: TaskIndexEntry) -> Candidate:
    return Candidate(
        task_id=e.task_id,
        kind=e.kind,
        status=e.status,
        goal=e.goal,
        summary=e.summary,
        language=e.language,
        object_refs=list(e.object_refs or []),
        last_active_at=clock.utc(e.last_active_at),
    )


def entry_text(goal: str, summary: str, refs: Sequence[dict[str, Any]]) -> str:
    names = " ".join(str(r.get("name", "")) for r in refs)
    return " ".join(p for p in (goal, summary, names) if p)


LATEST_SAID = 3  # the person's latest messages to a task its summary keeps
SUMMARY_CHARS = 600


def current_summary(goal: str, briefing: str, latest: Sequence[str]) -> str:
    """What a task is about now: the person's latest words to it, newest first, then its
    briefing (a task that turned from a poster into a flyer reads as the flyer). Deterministic
    and bounded, so refreshing it twice writes the same text."""
    said = [" ".join(t.split()) for t in latest if " ".join(t.split()) != " ".join(goal.split())]
    parts = ["latest: " + " / ".join(said)] if said else []
    if briefing.strip():
        parts.append(briefing.strip())
    text = "; ".join(parts)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


async def _latest_said(
    s: AsyncSession, task_ids: list[str], forgotten: set[str]
) -> dict[str, list[str]]:
    """The person's latest messages to each task, newest first (bounded per task)."""
    ranked = (
        select(
            MessageRow.id,
            MessageRow.task_id,
            MessageRow.text,
            func.row_number()
            .over(partition_by=MessageRow.task_id, order_by=MessageRow.created_at.desc())
            .label("n"),
        )
        .where(MessageRow.task_id.in_(task_ids))
        .subquery()
    )
    rows = await s.execute(
        select(ranked.c.id, ranked.c.task_id, ranked.c.text)
        .where(ranked.c.n <= LATEST_SAID + len(forgotten))
        .order_by(ranked.c.task_id, ranked.c.n)
    )
    out: dict[str, list[str]] = {}
    for mid, task_id, text in rows:
        kept = out.setdefault(str(task_id), [])
        if mid not in forgotten and len(kept) < LATEST_SAID:
            kept.append(str(text))
    return out


class TaskIndex:
    def __init__(self, embedder: Embedder, vectors: VectorIndex | None) -> None:
        self.embedder = embedder
        self.vectors = vectors
        self.collection = "task_index_" + re.sub(r"[^a-z0-9]+", "_", embedder.name.lower())
        self._ready = False

    async def _ensure(self) -> None:
        if self.vectors is not None and not self._ready:
            await self.vectors.ensure_collection(
                self.collection, self.embedder.dim, keyword_fields=("user_id", "task_id")
            )
            self._ready = True

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        # The model is CPU-bound numpy: keep the event loop (heartbeats, other activities) free.
        return await asyncio.to_thread(self.embedder.embed, list(texts))

    async def refresh(self, s: AsyncSession, user_id: str, forgotten: Collection[str] = ()) -> int:
        """Bring stale or missing entries of this user up to date; returns how many. Every
        turn moves its task's `updated_at`, so the next routing re-reads the task: its
        entry's summary says what the task became since it was created
        (`current_summary`), never a forgotten message."""
        q = (
            select(Task, TaskIndexEntry)
            .outerjoin(TaskIndexEntry, TaskIndexEntry.task_id == Task.id)
            .where(
                Task.user_id == user_id,
                or_(
                    TaskIndexEntry.task_id.is_(None),
                    Task.updated_at > TaskIndexEntry.source_updated_at,
                ),
            )
            .order_by(Task.updated_at.desc())
            .limit(REFRESH_BATCH)
        )
        rows = [(t, e) for t, e in await s.execute(q)]
        if not rows:
            return 0
        refs = await self._object_refs(s, [t.id for t, _ in rows])
        said = await _latest_said(s, [t.id for t, _ in rows], set(forgotten))
        summaries = {t.id: current_summary(t.goal, t.summary, said.get(t.id, [])) for t, _ in rows}
        texts = [entry_text(t.goal, summaries[t.id], refs.get(t.id, [])) for t, _ in rows]
        vecs = await self.embed(texts) if self.vectors is not None else []
        ids = [t.id for t, _ in rows]
        await s.execute(delete(TaskIndexTerm).where(TaskIndexTerm.task_id.in_(ids)))
        term_rows: list[dict[str, str]] = []
        entries: list[TaskIndexEntry] = []
        for i, (task, entry) in enumerate(rows):
            task_refs = refs.get(task.id, [])
            terms = content_terms(texts[i])
            if entry is None:
                entry = TaskIndexEntry(task_id=task.id, user_id=user_id)
                s.add(entry)
            entry.kind, entry.status = task.kind, task.status
            entry.goal, entry.summary, entry.language = task.goal, summaries[task.id], task.language
            entry.object_refs = task_refs
            entry.keywords = " ".join(terms)
            entry.source_updated_at = task.updated_at
            entry.last_active_at = task.updated_at
            entry.refreshed_at = clock.now()
            entry.vector_id = task.id if self.vectors is not None else None
            entries.append(entry)
            term_rows.extend({"task_id": task.id, "term": t, "user_id": user_id} for t in terms)
        await s.flush()  # entries first: terms reference them
        if term_rows:
            await s.execute(insert(TaskIndexTerm), term_rows)
        if self.vectors is not None:
            points = [
                VectorPoint(id=t.id, vector=vecs[i], payload={"user_id": user_id, "task_id": t.id})
                for i, (t, _) in enumerate(rows)
            ]
            if not await self._upsert(points):
                for entry in entries:  # stale again: the next routing writes their vectors
                    entry.vector_id, entry.source_updated_at = None, NEVER
        return len(rows)

    async def _upsert(self, points: list[VectorPoint]) -> bool:
        """Upserts are idempotent: a retry after a failed commit writes the same points. An
        index that is down (the memory service) leaves routing to keywords, never fails it."""
        try:
            await self._ensure()
            assert self.vectors is not None
            await self.vectors.upsert(self.collection, points)
            return True
        except Exception as e:
            log.warning("task index vectors not written (routing by keywords): %r", e)
            return False

    async def _search(
        self, vector: list[float], limit: int, filter: dict[str, Any]
    ) -> dict[str, float]:
        """Vector hits by id; none when the index is down (the router still has keywords)."""
        if self.vectors is None:
            return {}
        try:
            await self._ensure()
            hits = await self.vectors.search(self.collection, vector, limit, filter=filter)
        except Exception as e:
            log.warning("task index vectors unavailable (routing by keywords): %r", e)
            return {}
        return {h.id: h.score for h in hits}

    async def _object_refs(
        self, s: AsyncSession, task_ids: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        q = (
            select(TaskObject.task_id, WorkObject.id, WorkObject.name, WorkObject.type)
            .join(WorkObject, WorkObject.id == TaskObject.object_id)
            .where(TaskObject.task_id.in_(task_ids), WorkObject.deleted.is_(False))
            .order_by(WorkObject.created_at.desc())
        )
        out: dict[str, list[dict[str, Any]]] = {}
        for task_id, obj_id, name, type_ in await s.execute(q):
            refs = out.setdefault(task_id, [])
            if len(refs) < MAX_OBJECT_REFS:
                refs.append({"id": obj_id, "name": name, "type": type_})
        return out

    async def candidates(
        self,
        s: AsyncSession,
        user_id: str,
        text: str,
        vector: list[float] | None,
        active_window: int,
        search_limit: int,
        pinned: Sequence[str] = (),
    ) -> list[Candidate]:
        """Recent active tasks + keyword hits + vector hits, at most
        `active_window + 2 * search_limit + len(pinned)`: bounded, whatever the index size."""
        found: dict[str, Candidate] = {}
        recent = await s.scalars(
            select(TaskIndexEntry)
            .where(TaskIndexEntry.user_id == user_id, TaskIndexEntry.status != "archived")
            .order_by(TaskIndexEntry.last_active_at.desc())
            .limit(active_window)
        )
        for e in recent:
            found[e.task_id] = _candidate(e)
            found[e.task_id].sources.append("recent")
        hits: dict[str, int] = {}
        terms = content_terms(text)
        if terms:
            count = func.count().label("n")
            # Among equally good matches the more recently active task wins: a common word
            # ("poster") then still surfaces the person's latest poster work.
            rows = await s.execute(
                select(TaskIndexTerm.task_id, count)
                .join(TaskIndexEntry, TaskIndexEntry.task_id == TaskIndexTerm.task_id)
                .where(TaskIndexTerm.user_id == user_id, TaskIndexTerm.term.in_(terms))
                .group_by(TaskIndexTerm.task_id, TaskIndexEntry.last_active_at)
                .order_by(count.desc(), TaskIndexEntry.last_active_at.desc())
                .limit(search_limit)
            )
            hits = {tid: int(n) for tid, n in rows}
        sims: dict[str, float] = {}
        if vector is not None:
            sims = await self._search(vector, search_limit, {"user_id": user_id})
        missing = [t for t in [*pinned, *hits, *sims] if t not in found]
        if missing:
            for e in await s.scalars(
                select(TaskIndexEntry).where(
                    TaskIndexEntry.user_id == user_id, TaskIndexEntry.task_id.in_(missing)
                )
            ):
                found[e.task_id] = _candidate(e)
        for tid, c in found.items():
            if tid in hits:
                c.keyword_hits = hits[tid]
                c.sources.append("keyword")
            if tid in sims:
                c.similarity = sims[tid]
                c.sources.append("vector")
            if tid in pinned:
                c.sources.append("object")
        return sorted(found.values(), key=lambda c: c.last_active_at, reverse=True)

    async def recent_running(self, s: AsyncSession, user_id: str, limit: int) -> list[Candidate]:
        rows = await s.scalars(
            select(TaskIndexEntry)
            .where(TaskIndexEntry.user_id == user_id, TaskIndexEntry.status.in_(ACTIVE_STATUSES))
            .order_by(TaskIndexEntry.last_active_at.desc())
            .limit(limit)
        )
        return [_candidate(e) for e in rows]

    async def similarities(
        self, user_id: str, vector: list[float] | None, task_ids: list[str], limit: int
    ) -> dict[str, float]:
        """Cosine of the message against the given tasks only (the duplicate window)."""
        if self.vectors is None or vector is None or not task_ids:
            return {}
        return await self._search(vector, limit, {"user_id": user_id, "task_id": task_ids})

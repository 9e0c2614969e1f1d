"""The memory service's process-wide clients: vector index + embedder, and vector sync.

Only worker processes call `get_services` (the embedded engine belongs to one process);
the api reads memory from SQL only.
"""

from __future__ import annotations

import asyncio
import re
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from lomo.db.engine import Database
from lomo.db.models import MessageRow
from lomo.settings import Settings
from memory.dates import dated
from memory.models import Evidence, Memory, MemoryLink, MemoryVersion
from vectors import VectorHit, VectorIndex, VectorPoint, open_vector_index
from vectors.embeddings import Embedder, get_embedder

KEYWORD_FIELDS = ("user_id", "visibility", "memory_id")
# Query vectors kept per process: a step without new words searches with its task's goal
# alone, the same text at every step after a tool call (an embedding is a pure function of
# the text; the default model spends ~2.5 ms of CPU on one). Kept as arrays of doubles,
# the same values in a quarter of a list's memory (4 KB instead of 16 KB at 512 dimensions).
QUERY_CACHE = 256


def visibility(scope: str, task_id: str | None) -> str:
    """Who may see a memory: every task of the person, or only the task it was said in."""
    return f"task:{task_id}" if scope == "task" else "user"


@dataclass
class MemoryServices:
    index: VectorIndex
    embedder: Embedder
    collection: str = ""
    evidence_collection: str = ""  # the person's own words, beside the memories
    _ready: bool = field(default=False, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _queries: OrderedDict[str, array[float]] = field(default_factory=OrderedDict, init=False)
    _queries_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        name = re.sub(r"[^A-Za-z0-9_-]", "-", self.embedder.name)
        self.collection = self.collection or "memory_" + name
        self.evidence_collection = self.evidence_collection or "evidence_" + name

    async def ready(self) -> None:
        if not self._ready:
            async with self._lock:
                if not self._ready:
                    for name in (self.collection, self.evidence_collection):
                        await self.index.ensure_collection(name, self.embedder.dim, KEYWORD_FIELDS)
                    self._ready = True

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embedder.embed, texts)

    def cached_query(self, query: str) -> list[float] | None:
        """The query's embedding if it was embedded lately."""
        with self._queries_lock:
            vec = self._queries.get(query)
            if vec is None:
                return None
            self._queries.move_to_end(query)
        return vec.tolist()

    def query_vector(self, query: str) -> list[float]:
        """The query's embedding, from the cache or embedded now (blocking: call it off the
        event loop)."""
        vec = self.cached_query(query)
        if vec is not None:
            return vec
        vec = self.embedder.embed([query])[0]
        with self._queries_lock:
            self._queries[query] = array("d", vec)
            while len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vec

    async def sync_versions(self, db: Database, version_ids: Iterable[str]) -> None:
        """Make the index match SQL for these versions: active ones indexed, others gone.

        Idempotent, so a retry after a crash between the SQL commit and this call repairs
        the index."""
        ids = sorted(set(version_ids))
        if not ids:
            return
        await self.ready()
        async with db.session() as s:
            rows = (
                await s.execute(
                    select(MemoryVersion, Memory)
                    .join(Memory, Memory.id == MemoryVersion.memory_id)
                    .where(MemoryVersion.id.in_(ids))
                )
            ).all()
        active = [(v, m) for v, m in rows if v.status == "active" and m.status == "active"]
        gone = set(ids) - {v.id for v, _ in active}
        if gone:
            await self.index.delete(self.collection, sorted(gone))
        if active:
            vectors = await self.embed([v.content for v, _ in active])
            await self.index.upsert(
                self.collection,
                [
                    VectorPoint(
                        v.id,
                        vec,
                        {
                            "user_id": m.user_id,
                            "memory_id": m.id,
                            "visibility": visibility(m.scope, m.task_id),
                            "scope": m.scope,
                            "kind": m.kind,
                        },
                    )
                    for (v, m), vec in zip(active, vectors, strict=True)
                ],
            )

    async def sync_evidence(self, db: Database, evidence_ids: Iterable[str]) -> None:
        """Index the person's own words next to the facts drawn from them (a fact the
        extractor missed is still found by what was said); forgotten evidence leaves the
        index. Idempotent, like `sync_versions`."""
        ids = sorted(set(evidence_ids))
        if not ids:
            return
        await self.ready()
        async with db.session() as s:
            rows = (
                await s.execute(
                    select(Evidence, MessageRow.created_at)
                    .outerjoin(MessageRow, MessageRow.id == Evidence.message_id)
                    .where(Evidence.id.in_(ids))
                )
            ).all()
            hidden = await withheld_words(s, rows[0][0].user_id, ids) if rows else set()
            # Embedded with the day it was said and the dates it refers to (memory/dates.py).
            usable = [
                (ev, dated(ev.text, said or ev.created_at))
                for ev, said in rows
                if ev.id not in hidden
            ]
        gone = set(ids) - {ev.id for ev, _ in usable}
        if gone:
            await self.index.delete(self.evidence_collection, sorted(gone))
        if usable:
            vectors = await self.embed([text for _, text in usable])
            await self.index.upsert(
                self.evidence_collection,
                [
                    VectorPoint(
                        ev.id,
                        vec,
                        {
                            "user_id": ev.user_id,
                            # A message said inside a task is that task's, like its facts.
                            "visibility": visibility(
                                "task" if ev.task_id else "profile", ev.task_id
                            ),
                        },
                    )
                    for (ev, _), vec in zip(usable, vectors, strict=True)
                ],
            )

    async def delete_memories(self, memory_ids: Iterable[str]) -> None:
        ids = sorted(set(memory_ids))
        if ids:
            await self.ready()
            await self.index.delete_where(self.collection, {"memory_id": ids})

    async def search(
        self, user_id: str, task_id: str, query: str, limit: int, evidence: bool = False
    ) -> list[VectorHit]:
        """The nearest memories (`evidence`: and the person's own words, merged by score:
        one embedder, so the scores compare)."""
        await self.ready()
        vec = self.cached_query(query)  # a cached query needs no thread hop
        if vec is None:
            vec = await asyncio.to_thread(self.query_vector, query)
        flt: dict[str, str | list[str]] = {
            "user_id": user_id,
            "visibility": ["user", visibility("task", task_id)],
        }
        hits = await self.index.search(self.collection, vec, limit, flt)
        if evidence:
            hits += await self.index.search(self.evidence_collection, vec, limit, flt)
            hits.sort(key=lambda h: -h.score)
        return hits[:limit]


async def withheld_words(
    s: AsyncSession, user_id: str, evidence_ids: list[str] | None = None
) -> set[str]:
    """The person's evidence whose words must not come back through recall: forgotten
    itself; the source of a version a forget deleted (its other words build on the
    forgotten ones); or the source of a version the person corrected afterwards (wrong by
    their own word, so never shown again, not even as history: a change over time is)."""
    unusable = select(Evidence.id).where(Evidence.user_id == user_id, Evidence.usable.is_(False))
    built_on = (
        select(MemoryLink.source_id)
        .join(MemoryVersion, MemoryVersion.id == MemoryLink.target_id)
        .where(
            MemoryVersion.user_id == user_id,
            MemoryVersion.status == "deleted",
            MemoryLink.source_kind == "evidence",
        )
    )
    later = aliased(MemoryVersion)
    corrected = (
        select(MemoryLink.source_id)
        .join(MemoryVersion, MemoryVersion.id == MemoryLink.target_id)
        .join(
            later,
            (later.memory_id == MemoryVersion.memory_id)
            & (later.version > MemoryVersion.version)
            & (later.relation == "CORRECT"),
        )
        .where(MemoryVersion.user_id == user_id, MemoryLink.source_kind == "evidence")
    )
    if evidence_ids is not None:
        unusable = unusable.where(Evidence.id.in_(evidence_ids))
        built_on = built_on.where(MemoryLink.source_id.in_(evidence_ids))
        corrected = corrected.where(MemoryLink.source_id.in_(evidence_ids))
    out: set[str] = set()
    for query in (unusable, built_on, corrected):
        out |= set(await s.scalars(query))
    return out


async def sources_of(s: AsyncSession, version_ids: list[str]) -> list[str]:
    """The evidence these versions were made from."""
    if not version_ids:
        return []
    return list(
        await s.scalars(
            select(MemoryLink.source_id).where(
                MemoryLink.target_id.in_(version_ids), MemoryLink.source_kind == "evidence"
            )
        )
    )


_shared: dict[tuple[str, str, str], MemoryServices] = {}
_shared_lock = threading.Lock()


def get_services(settings: Settings) -> MemoryServices:
    """One MemoryServices per (index location, embedder) in this process."""
    key = (settings.vector_url or str(settings.data_dir.resolve()), settings.embedder, "")
    with _shared_lock:
        if key not in _shared:
            _shared[key] = MemoryServices(open_vector_index(settings), get_embedder(settings))
        return _shared[key]


def install_services(settings: Settings, services: MemoryServices) -> None:
    """Use these clients for `settings` in this process (tests inject failing backends)."""
    key = (settings.vector_url or str(settings.data_dir.resolve()), settings.embedder, "")
    with _shared_lock:
        _shared[key] = services


async def close_services() -> None:
    with _shared_lock:
        services = list(_shared.values())
        _shared.clear()
    for svc in services:
        await svc.index.close()

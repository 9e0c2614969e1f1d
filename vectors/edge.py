"""The embedded backend: one Qdrant Edge shard per collection, in this process.

Edge shards are synchronous and run no background optimizer, so calls go to a thread
(the event loop stays free) and the HNSW index is (re)built by `optimize()` once enough
unindexed points have piled up; until then Qdrant searches those points exactly.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from pathlib import Path

import qdrant_edge as qe

from vectors.base import (
    NoCollection,
    VectorFilter,
    VectorHit,
    VectorIndex,
    VectorIndexError,
    VectorPoint,
    filter_conditions,
    hit_from,
    point_uuid,
    stored_payload,
)

_META = "lomo_collection.json"
# Unindexed points tolerated before an optimize pass; exact search below this is fast.
OPTIMIZE_AFTER = 5_000


def to_edge_filter(filter: VectorFilter | None) -> qe.Filter | None:
    must = filter_conditions(
        filter,
        lambda key, values: qe.FieldCondition(key, match=qe.MatchAny(values)),
        lambda key, value: qe.FieldCondition(key, match=qe.MatchValue(value)),
    )
    return None if must is None else qe.Filter(must=[*must])


class _Collection:
    def __init__(self, shard: qe.EdgeShard, dim: int) -> None:
        self.shard = shard
        self.dim = dim
        self.pending = 0
        self.lock = threading.Lock()  # serializes writes and optimize on one shard


class EdgeVectorIndex(VectorIndex):
    def __init__(self, root: Path, optimize_after: int = OPTIMIZE_AFTER) -> None:
        self.root = root
        self.optimize_after = optimize_after
        self._collections: dict[str, _Collection] = {}
        self._open_lock = threading.Lock()

    def _path(self, name: str) -> Path:
        if not name.replace("_", "").replace("-", "").isalnum():
            raise VectorIndexError(f"bad collection name {name!r}")
        return self.root / name

    def _open(self, name: str, dim: int, keyword_fields: Sequence[str]) -> None:
        with self._open_lock:
            col = self._collections.get(name)
            if col is None:
                path = self._path(name)
                meta = path / _META
                if meta.exists():
                    stored = json.loads(meta.read_text())
                    col = _Collection(qe.EdgeShard.load(str(path)), int(stored["dim"]))
                else:
                    path.mkdir(parents=True, exist_ok=True)
                    cfg = qe.EdgeConfig(
                        vectors={"": qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)}
                    )
                    col = _Collection(qe.EdgeShard.create(str(path), cfg), dim)
                    meta.write_text(json.dumps({"dim": dim}))
                self._collections[name] = col
            if col.dim != dim:
                raise VectorIndexError(f"collection {name} has dimension {col.dim}, not {dim}")
            for f in keyword_fields:
                with col.lock:
                    col.shard.update(
                        qe.UpdateOperation.create_field_index(f, qe.PayloadSchemaType.Keyword)
                    )

    def _get(self, name: str) -> _Collection:
        col = self._collections.get(name)
        if col is None:
            raise NoCollection(f"no collection {name}; call ensure_collection first")
        return col

    async def ensure_collection(
        self, name: str, dim: int, keyword_fields: Sequence[str] = ()
    ) -> None:
        await asyncio.to_thread(self._open, name, dim, tuple(keyword_fields))

    def _upsert(self, name: str, points: Sequence[VectorPoint]) -> None:
        col = self._get(name)
        for p in points:
            if len(p.vector) != col.dim:
                raise VectorIndexError(f"vector of {len(p.vector)} dims for {name} ({col.dim})")
        edge_points = [
            qe.Point(point_uuid(p.id), {"": p.vector}, stored_payload(p)) for p in points
        ]
        with col.lock:
            col.shard.update(qe.UpdateOperation.upsert_points(edge_points))
            col.pending += len(points)
            if col.pending >= self.optimize_after:
                col.shard.optimize()
                col.pending = 0
            col.shard.flush()

    async def upsert(self, name: str, points: Sequence[VectorPoint]) -> None:
        if points:
            await asyncio.to_thread(self._upsert, name, list(points))

    def _search(
        self, name: str, vector: list[float], limit: int, filter: VectorFilter | None, exact: bool
    ) -> list[VectorHit]:
        col = self._get(name)
        if len(vector) != col.dim:
            raise VectorIndexError(f"query of {len(vector)} dims for {name} ({col.dim})")
        req = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(vector),
            filter=to_edge_filter(filter),
            with_payload=True,
            params=qe.SearchParams(exact=exact),
        )
        return [hit_from(p.id, p.score, p.payload) for p in col.shard.query(req)]

    async def search(
        self,
        name: str,
        vector: Sequence[float],
        limit: int,
        filter: VectorFilter | None = None,
        exact: bool = False,
    ) -> list[VectorHit]:
        return await asyncio.to_thread(self._search, name, list(vector), limit, filter, exact)

    def _delete(self, name: str, op: qe.UpdateOperation) -> None:
        col = self._get(name)
        with col.lock:
            col.shard.update(op)
            col.shard.flush()

    async def delete(self, name: str, ids: Sequence[str]) -> None:
        if ids:
            op = qe.UpdateOperation.delete_points([point_uuid(i) for i in ids])
            await asyncio.to_thread(self._delete, name, op)

    async def delete_where(self, name: str, filter: VectorFilter) -> None:
        edge_filter = to_edge_filter(filter)
        if edge_filter is None:
            raise VectorIndexError("delete_where needs a filter")
        await asyncio.to_thread(
            self._delete, name, qe.UpdateOperation.delete_points_by_filter(edge_filter)
        )

    async def count(self, name: str, filter: VectorFilter | None = None) -> int:
        col = self._get(name)
        req = qe.CountRequest(exact=True, filter=to_edge_filter(filter))
        return int(await asyncio.to_thread(col.shard.count, req))

    def optimize(self, name: str) -> None:
        """Build the HNSW index now (benchmarks; normally triggered by write volume)."""
        col = self._get(name)
        with col.lock:
            col.shard.optimize()
            col.pending = 0

    async def close(self) -> None:
        with self._open_lock:
            for col in self._collections.values():
                with col.lock:
                    col.shard.flush()
                    col.shard.close()
            self._collections.clear()

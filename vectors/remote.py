"""The vector index the memory service owns, reached over HTTP (`lomo memory`, memory/server.py).

Workers and the api use this backend when `memory_url` is set: one process holds the
engine, so any number of workers share it, even the embedded engine that lives in one
process. A refusal of the index (a dimension that does not match) comes back as
VectorIndexError; an unreachable or slow service raises httpx's errors, which callers
treat as "no vectors this time".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from vectors.base import (
    NoCollection,
    VectorFilter,
    VectorHit,
    VectorIndex,
    VectorIndexError,
    VectorPoint,
    is_any_of,
)

# A vector operation is small; a service that does not answer within this is treated as down.
CALL_TIMEOUT = 10.0


def _filter(filter: VectorFilter | None) -> dict[str, Any] | None:
    if filter is None:
        return None
    return {k: list(v) if is_any_of(v) else v for k, v in filter.items()}


class RemoteVectorIndex(VectorIndex):
    def __init__(self, url: str, timeout: float = CALL_TIMEOUT) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout)
        self._ensured: dict[str, dict[str, Any]] = {}

    async def _call(self, name: str, op: str, body: dict[str, Any]) -> Any:
        r = await self._http.post(f"/v1/vectors/{name}/{op}", json=body)
        if r.status_code == 409 and name in self._ensured:
            # The service restarted and has not opened the collection yet: open it again.
            await self._call(name, "ensure", self._ensured[name])
            r = await self._http.post(f"/v1/vectors/{name}/{op}", json=body)
        if r.status_code == 409:
            raise NoCollection(str(r.json().get("detail", r.text)))
        if r.status_code == 422:
            raise VectorIndexError(str(r.json().get("detail", r.text)))
        r.raise_for_status()
        return r.json()

    async def ensure_collection(
        self, name: str, dim: int, keyword_fields: Sequence[str] = ()
    ) -> None:
        body = {"dim": dim, "keyword_fields": list(keyword_fields)}
        await self._call(name, "ensure", body)
        self._ensured[name] = body

    async def upsert(self, name: str, points: Sequence[VectorPoint]) -> None:
        if points:
            body = [{"id": p.id, "vector": p.vector, "payload": p.payload} for p in points]
            await self._call(name, "upsert", {"points": body})

    async def search(
        self,
        name: str,
        vector: Sequence[float],
        limit: int,
        filter: VectorFilter | None = None,
        exact: bool = False,
    ) -> list[VectorHit]:
        body = {"vector": list(vector), "limit": limit, "filter": _filter(filter), "exact": exact}
        out = await self._call(name, "search", body)
        return [VectorHit(h["id"], float(h["score"]), h["payload"]) for h in out["hits"]]

    async def delete(self, name: str, ids: Sequence[str]) -> None:
        if ids:
            await self._call(name, "delete", {"ids": list(ids)})

    async def delete_where(self, name: str, filter: VectorFilter) -> None:
        await self._call(name, "delete_where", {"filter": _filter(filter)})

    async def count(self, name: str, filter: VectorFilter | None = None) -> int:
        return int((await self._call(name, "count", {"filter": _filter(filter)}))["count"])

    async def close(self) -> None:
        await self._http.aclose()

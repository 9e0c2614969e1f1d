"""The production backend: a Qdrant server through `qdrant-client` (tests use its local mode)."""

from __future__ import annotations

from collections.abc import Sequence

from qdrant_client import AsyncQdrantClient, models

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


def to_filter(filter: VectorFilter | None) -> models.Filter | None:
    must = filter_conditions(
        filter,
        lambda key, values: models.FieldCondition(key=key, match=models.MatchAny(any=values)),
        lambda key, value: models.FieldCondition(key=key, match=models.MatchValue(value=value)),
    )
    return None if must is None else models.Filter(must=[*must])


class QdrantServerIndex(VectorIndex):
    def __init__(self, client: AsyncQdrantClient) -> None:
        self.client = client
        self._dims: dict[str, int] = {}

    async def ensure_collection(
        self, name: str, dim: int, keyword_fields: Sequence[str] = ()
    ) -> None:
        if await self.client.collection_exists(name):
            info = await self.client.get_collection(name)
            params = info.config.params.vectors
            have = params.size if isinstance(params, models.VectorParams) else None
            if have is not None and have != dim:
                raise VectorIndexError(f"collection {name} has dimension {have}, not {dim}")
        else:
            await self.client.create_collection(
                name, vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE)
            )
        for f in keyword_fields:
            await self.client.create_payload_index(
                name, f, field_schema=models.PayloadSchemaType.KEYWORD
            )
        self._dims[name] = dim

    def _dim(self, name: str) -> int:
        if name not in self._dims:
            raise NoCollection(f"no collection {name}; call ensure_collection first")
        return self._dims[name]

    async def upsert(self, name: str, points: Sequence[VectorPoint]) -> None:
        dim = self._dim(name)
        for p in points:
            if len(p.vector) != dim:
                raise VectorIndexError(f"vector of {len(p.vector)} dims for {name} ({dim})")
        if points:
            await self.client.upsert(
                name,
                [
                    models.PointStruct(
                        id=point_uuid(p.id), vector=p.vector, payload=stored_payload(p)
                    )
                    for p in points
                ],
            )

    async def search(
        self,
        name: str,
        vector: Sequence[float],
        limit: int,
        filter: VectorFilter | None = None,
        exact: bool = False,
    ) -> list[VectorHit]:
        dim = self._dim(name)
        if len(vector) != dim:
            raise VectorIndexError(f"query of {len(vector)} dims for {name} ({dim})")
        res = await self.client.query_points(
            name,
            query=list(vector),
            limit=limit,
            query_filter=to_filter(filter),
            with_payload=True,
            search_params=models.SearchParams(exact=True) if exact else None,
        )
        return [hit_from(p.id, p.score, p.payload) for p in res.points]

    async def delete(self, name: str, ids: Sequence[str]) -> None:
        self._dim(name)
        if ids:
            await self.client.delete(name, models.PointIdsList(points=[point_uuid(i) for i in ids]))

    async def delete_where(self, name: str, filter: VectorFilter) -> None:
        self._dim(name)
        f = to_filter(filter)
        if f is None:
            raise VectorIndexError("delete_where needs a filter")
        await self.client.delete(name, models.FilterSelector(filter=f))

    async def count(self, name: str, filter: VectorFilter | None = None) -> int:
        self._dim(name)
        res = await self.client.count(name, count_filter=to_filter(filter), exact=True)
        return int(res.count)

    async def close(self) -> None:
        await self.client.close()

"""The vector index: one narrow async interface, an embedded and a server backend."""

from __future__ import annotations

from lomo.settings import Settings
from vectors.base import (
    VectorFilter,
    VectorHit,
    VectorIndex,
    VectorIndexError,
    VectorPoint,
    point_uuid,
)


def open_vector_index(settings: Settings) -> VectorIndex:
    """The index as a worker or the api reaches it: through the memory service when
    `memory_url` is set, else opened in this process (`open_owned_index`)."""
    if settings.memory_url:
        from vectors.remote import RemoteVectorIndex

        return RemoteVectorIndex(settings.memory_url)
    return open_owned_index(settings)


def open_owned_index(settings: Settings) -> VectorIndex:
    """The server backend when `vector_url` is set, else the embedded engine under data_dir.

    Only one process may open the embedded engine (it holds the files): the memory service,
    or the one worker when no memory service runs."""
    if settings.vector_url:
        from qdrant_client import AsyncQdrantClient

        from vectors.server import QdrantServerIndex

        return QdrantServerIndex(AsyncQdrantClient(url=settings.vector_url))
    from vectors.edge import EdgeVectorIndex

    return EdgeVectorIndex(settings.data_dir / "vectors")


__all__ = [
    "VectorFilter",
    "VectorHit",
    "VectorIndex",
    "VectorIndexError",
    "VectorPoint",
    "open_owned_index",
    "open_vector_index",
    "point_uuid",
]

"""The narrow vector-index contract every backend implements (docs/architecture.md#memory).

Callers use string ids; Qdrant wants integers or UUIDs, so each id maps to a deterministic
UUID (uuid5) and the caller's id travels in the payload under `ID_KEY`. Filters are plain
equality / any-of maps: `{"user_id": "usr_1", "scope": ["profile", "project"]}`.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard, TypeVar

# A fixed namespace so every process maps the same string id to the same point id.
_NAMESPACE = uuid.UUID("6f1c3a52-5d0e-4b8e-9a55-0c8f1b7e2d41")
ID_KEY = "_id"

FilterValue = str | int | bool | Sequence[str] | Sequence[int]
VectorFilter = Mapping[str, FilterValue]
# A backend's own filter condition type.
C = TypeVar("C")


def point_uuid(item_id: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, item_id))


@dataclass
class VectorPoint:
    id: str
    vector: list[float]
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class VectorHit:
    id: str
    score: float
    payload: dict[str, Any]


class VectorIndexError(Exception):
    """The index refused an operation (e.g. a dimension that does not match the collection)."""


class NoCollection(VectorIndexError):
    """An operation on a collection this process has not opened (`ensure_collection`)."""


class VectorIndex(ABC):
    """Async, collection-scoped nearest-neighbour search with payload filters (cosine)."""

    @abstractmethod
    async def ensure_collection(
        self, name: str, dim: int, keyword_fields: Sequence[str] = ()
    ) -> None:
        """Create the collection if missing; `keyword_fields` get a payload index (fast
        filters). An existing collection with another dimension is an error."""

    @abstractmethod
    async def upsert(self, name: str, points: Sequence[VectorPoint]) -> None: ...

    @abstractmethod
    async def search(
        self,
        name: str,
        vector: Sequence[float],
        limit: int,
        filter: VectorFilter | None = None,
        exact: bool = False,
    ) -> list[VectorHit]:
        """Best `limit` hits, highest score first; `exact=True` skips the ANN index."""

    @abstractmethod
    async def delete(self, name: str, ids: Sequence[str]) -> None: ...

    @abstractmethod
    async def delete_where(self, name: str, filter: VectorFilter) -> None: ...

    @abstractmethod
    async def count(self, name: str, filter: VectorFilter | None = None) -> int: ...

    async def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release resources (files, connections)."""


def hit_from(point_id: Any, score: float, payload: dict[str, Any] | None) -> VectorHit:
    data = dict(payload or {})
    item_id = str(data.pop(ID_KEY, point_id))
    return VectorHit(id=item_id, score=float(score), payload=data)


def stored_payload(p: VectorPoint) -> dict[str, Any]:
    if ID_KEY in p.payload:
        raise VectorIndexError(f"payload key {ID_KEY!r} is reserved")
    return {**p.payload, ID_KEY: p.id}


def is_any_of(value: FilterValue) -> TypeGuard[Sequence[str] | Sequence[int]]:
    """A list of values (any of them matches), not one value to equal."""
    return isinstance(value, Sequence) and not isinstance(value, str)


def check_filter(filter: VectorFilter | None) -> None:
    for key, value in (filter or {}).items():
        if is_any_of(value) and len(value) == 0:
            # "any of nothing" matches nothing in Qdrant but is almost always a caller bug.
            raise VectorIndexError(f"filter {key!r} has an empty list of values")


def filter_conditions(
    filter: VectorFilter | None,
    any_of: Callable[[str, list[Any]], C],
    equals: Callable[[str, Any], C],
) -> list[C] | None:
    """The filter's conditions, one per key, made by a backend's own constructors: `any_of`
    for a list of values, `equals` for one value; None when there is nothing to filter."""
    check_filter(filter)
    if not filter:
        return None
    return [any_of(k, list(v)) if is_any_of(v) else equals(k, v) for k, v in filter.items()]

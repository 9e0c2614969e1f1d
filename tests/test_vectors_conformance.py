"""One conformance suite for every VectorIndex backend: the embedded Qdrant Edge engine,
the Qdrant server backend (through qdrant-client's local mode, the same client API) and the
memory service's index reached over HTTP (`remote`: a real server in a thread, the embedded
engine behind it)."""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import cast

import pytest
from qdrant_client import AsyncQdrantClient

from llm.types import ModelProvider
from lomo.db.engine import Database
from lomo.settings import Settings
from memory.server import create_memory_app
from memory.services import MemoryServices
from memory.writes import MemoryWrites
from tests.helpers import ThreadServer
from vectors import VectorIndex, VectorIndexError, VectorPoint, open_vector_index
from vectors.edge import EdgeVectorIndex
from vectors.embeddings import FakeEmbedder
from vectors.remote import RemoteVectorIndex
from vectors.server import QdrantServerIndex

DIM = 8
Factory = Callable[[], VectorIndex]


def _unit(v: list[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


def _vec(seed: int) -> list[float]:
    rnd = random.Random(seed)
    return _unit([rnd.uniform(-1, 1) for _ in range(DIM)])


def _factory(kind: str, tmp: Path) -> Factory:
    if kind == "edge":
        return lambda: EdgeVectorIndex(tmp / "edge")
    if kind == "server-memory":
        return lambda: QdrantServerIndex(AsyncQdrantClient(location=":memory:"))
    return lambda: QdrantServerIndex(AsyncQdrantClient(path=str(tmp / "local")))


@pytest.fixture(params=["edge", "server-memory", "server-path", "remote"])
async def factory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Factory]:
    if request.param != "remote":
        yield _factory(request.param, tmp_path)
        return
    server, services = _served(tmp_path)
    with server:
        yield lambda: RemoteVectorIndex(server.url)
    await services.index.close()


@pytest.fixture
async def index(factory: Factory) -> AsyncIterator[VectorIndex]:
    idx = factory()
    await idx.ensure_collection("mem", DIM, keyword_fields=["user_id"])
    yield idx
    await idx.close()


async def test_search_returns_caller_ids_best_first(index: VectorIndex) -> None:
    pts = [VectorPoint(f"mem_{i}", _vec(i), {"user_id": "u1", "n": i}) for i in range(20)]
    await index.upsert("mem", pts)
    hits = await index.search("mem", _vec(7), limit=5)
    assert hits[0].id == "mem_7"
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert hits[0].payload == {"user_id": "u1", "n": 7}  # the reserved id key is not leaked
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(hits) == 5


async def test_filters_equality_and_any_of(index: VectorIndex) -> None:
    await index.upsert(
        "mem",
        [
            VectorPoint("a", _vec(1), {"user_id": "u1", "scope": "profile"}),
            VectorPoint("b", _vec(2), {"user_id": "u1", "scope": "task"}),
            VectorPoint("c", _vec(3), {"user_id": "u2", "scope": "profile"}),
        ],
    )
    only_u2 = await index.search("mem", _vec(1), limit=10, filter={"user_id": "u2"})
    assert [h.id for h in only_u2] == ["c"]
    u1_any = await index.search(
        "mem", _vec(1), limit=10, filter={"user_id": "u1", "scope": ["profile", "project"]}
    )
    assert [h.id for h in u1_any] == ["a"]
    assert await index.count("mem", {"user_id": "u1"}) == 2
    assert await index.count("mem", {"scope": ["task", "profile"]}) == 3
    assert await index.count("mem") == 3
    with pytest.raises(VectorIndexError):
        await index.search("mem", _vec(1), limit=10, filter={"scope": []})


async def test_upsert_same_id_replaces(index: VectorIndex) -> None:
    await index.upsert("mem", [VectorPoint("x", _vec(1), {"user_id": "u1", "v": 1})])
    await index.upsert("mem", [VectorPoint("x", _vec(2), {"user_id": "u1", "v": 2})])
    assert await index.count("mem") == 1
    hits = await index.search("mem", _vec(2), limit=3)
    assert [(h.id, h.payload["v"]) for h in hits] == [("x", 2)]


async def test_delete_by_id_and_by_filter(index: VectorIndex) -> None:
    await index.upsert(
        "mem", [VectorPoint(f"p{i}", _vec(i), {"user_id": f"u{i % 2}"}) for i in range(10)]
    )
    await index.delete("mem", ["p0", "p1", "missing"])
    assert await index.count("mem") == 8
    assert all(h.id not in ("p0", "p1") for h in await index.search("mem", _vec(0), limit=10))
    await index.delete_where("mem", {"user_id": "u0"})
    left = await index.search("mem", _vec(3), limit=10)
    assert sorted(h.id for h in left) == ["p3", "p5", "p7", "p9"]
    with pytest.raises(VectorIndexError):
        await index.delete_where("mem", {})


async def test_dimension_is_enforced(index: VectorIndex) -> None:
    with pytest.raises(VectorIndexError):
        await index.upsert("mem", [VectorPoint("bad", [1.0, 0.0], {})])
    with pytest.raises(VectorIndexError):
        await index.search("mem", [1.0, 0.0], limit=1)
    with pytest.raises(VectorIndexError):
        await index.ensure_collection("mem", DIM + 1)
    with pytest.raises(VectorIndexError):
        await index.search("unknown", _vec(1), limit=1)


async def test_collections_are_separate(index: VectorIndex) -> None:
    await index.ensure_collection("tasks", DIM)
    await index.upsert("tasks", [VectorPoint("t1", _vec(1), {})])
    await index.upsert("mem", [VectorPoint("m1", _vec(1), {})])
    assert [h.id for h in await index.search("tasks", _vec(1), limit=5)] == ["t1"]
    assert await index.count("mem") == 1


async def test_exact_and_indexed_search_agree(index: VectorIndex) -> None:
    await index.upsert("mem", [VectorPoint(f"p{i}", _vec(i), {"user_id": "u"}) for i in range(200)])
    q = _vec(10_000)
    approx = await index.search("mem", q, limit=10)
    exact = await index.search("mem", q, limit=10, exact=True)
    assert [h.id for h in approx] == [h.id for h in exact]


@pytest.mark.parametrize("kind", ["edge", "server-path"])
async def test_persistent_backends_survive_reopen(kind: str, tmp_path: Path) -> None:
    make = _factory(kind, tmp_path)
    idx = make()
    await idx.ensure_collection("mem", DIM)
    await idx.upsert("mem", [VectorPoint("keep", _vec(1), {"user_id": "u"})])
    await idx.close()
    again = make()
    await again.ensure_collection("mem", DIM)
    assert [h.id for h in await again.search("mem", _vec(1), limit=1)] == ["keep"]
    await again.close()


async def test_edge_optimize_keeps_results(tmp_path: Path) -> None:
    """Above the threshold the embedded backend builds its HNSW index; results stay the same."""
    idx = EdgeVectorIndex(tmp_path / "e", optimize_after=50)
    await idx.ensure_collection("mem", DIM)
    await idx.upsert("mem", [VectorPoint(f"p{i}", _vec(i), {}) for i in range(120)])
    hits = await idx.search("mem", _vec(42), limit=1)
    assert hits[0].id == "p42"
    assert await idx.count("mem") == 120
    await idx.close()


@pytest.mark.filterwarnings("ignore:Failed to obtain server version")
def test_open_vector_index_picks_backend(tmp_path: Path) -> None:
    assert isinstance(open_vector_index(Settings(data_dir=tmp_path)), EdgeVectorIndex)
    server = open_vector_index(Settings(data_dir=tmp_path, vector_url="http://127.0.0.1:6333"))
    assert isinstance(server, QdrantServerIndex)
    remote = open_vector_index(
        Settings(data_dir=tmp_path, vector_url="http://127.0.0.1:6333", memory_url="http://m:1")
    )
    assert isinstance(remote, RemoteVectorIndex)  # the memory service's index wins


def _served(root: Path, port: int | None = None) -> tuple[ThreadServer, MemoryServices]:
    """The memory service's app on an embedded index under `root`; only its vector routes
    are called, so the writes' database and model stay unused."""
    services = MemoryServices(EdgeVectorIndex(root / "served"), FakeEmbedder(DIM))
    db = Database(f"sqlite+aiosqlite:///{root / 'unused.db'}")
    writes = MemoryWrites(db, Settings(data_dir=root), cast(ModelProvider, None), services)
    return ThreadServer(create_memory_app(writes, "embedded"), port), services


async def test_remote_client_reopens_after_the_service_restarted(tmp_path: Path) -> None:
    """A memory service that restarted has no collection open: the client's next call opens
    it again (the points were on disk) instead of failing until the client restarts too."""
    first, services = _served(tmp_path)
    with first:
        client = RemoteVectorIndex(first.url)
        await client.ensure_collection("mem", DIM, keyword_fields=["user_id"])
        await client.upsert("mem", [VectorPoint("keep", _vec(1), {"user_id": "u"})])
    await services.index.close()
    second, services = _served(tmp_path, first.port)
    with second:
        hits = await client.search("mem", _vec(1), limit=1, filter={"user_id": "u"})
        assert [h.id for h in hits] == ["keep"]
        await client.close()
    await services.index.close()

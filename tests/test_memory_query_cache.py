"""Query vectors are cached per process: a step after a tool call searches with its task's
goal alone, the same text as the step before, and the default model spends milliseconds of
CPU on each embedding. Hits are the same with and without the cache."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from memory import services as services_mod
from memory.services import MemoryServices, visibility
from vectors import VectorPoint
from vectors.edge import EdgeVectorIndex
from vectors.embeddings import FakeEmbedder


class Counting(FakeEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return super().embed(texts)


async def test_a_repeated_query_is_embedded_once_and_finds_the_same(tmp_path: Path) -> None:
    emb = Counting()
    svc = MemoryServices(EdgeVectorIndex(tmp_path / "edge"), emb)
    await svc.ready()
    [vec] = FakeEmbedder().embed(["warm colours for the poster"])
    payload = {"user_id": "u1", "visibility": visibility("user", None), "memory_id": "m1"}
    await svc.index.upsert(svc.collection, [VectorPoint("v1", vec, payload)])

    first = await svc.search("u1", "t1", "poster colours", 5)
    again = await svc.search("u1", "t1", "poster colours", 5)
    assert [h.id for h in first] == [h.id for h in again] == ["v1"]
    assert emb.texts == ["poster colours"]
    await svc.search("u1", "t1", "something else", 5)
    assert emb.texts == ["poster colours", "something else"]
    await svc.index.close()


async def test_the_cache_keeps_only_the_latest_queries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services_mod, "QUERY_CACHE", 3)
    emb = Counting()
    svc = MemoryServices(EdgeVectorIndex(tmp_path / "edge"), emb)
    for q in ("a", "b", "c", "a", "d"):  # "a" used again: "b" is the oldest when "d" comes
        svc.query_vector(q)
    assert emb.texts == ["a", "b", "c", "d"]
    assert svc.query_vector("d") == FakeEmbedder().embed(["d"])[0]  # a hit: the same floats
    assert emb.texts == ["a", "b", "c", "d"]
    svc.query_vector("b")
    svc.query_vector("a")
    assert emb.texts == ["a", "b", "c", "d", "b"]
    assert svc.query_vector("c") == FakeEmbedder().embed(["c"])[0]
    assert emb.texts == ["a", "b", "c", "d", "b", "c"]

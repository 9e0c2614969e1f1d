"""Routing context and latency by index size: tokens per routing decision must stay flat.

    .venv/bin/python bench/routing_context.py [--sizes 10,1000,10000] [--embedder usem|fake]

For each size: a fresh SQLite DB and embedded vector index, one person with N tasks
(indexed up front, as the lazy refresh would have done over time), then the same routing
messages through the real `route_message` activity with the offline stand-in router.
Tokens are the request's input tokens as the stand-in counts them (characters / 4 of the
system prompt, the candidate block and the message).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import insert

from activities.routing import RoutingActivities
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.migrate import upgrade
from lomo.db.models import MessageRow, Task
from lomo.ids import new_id
from lomo.settings import Settings
from routing.models import RoutingRecord
from routing.types import RouteRequest
from standin.model import OfflineModel
from tests.routing_eval.support import CountingProvider
from vectors.edge import EdgeVectorIndex
from vectors.embeddings import get_embedder

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SUBJECTS = [
    "brand posters for the summer festival",
    "a logo for the cafe",
    "product photos of sneakers",
    "a storyboard for a coffee ad",
    "wedding invitations",
    "an album cover",
    "icons for a mobile app",
    "a children's book about a bear",
    "a video of waves at the beach",
    "christmas cards for the team",
]
PLACES = ["Berlin", "Hamburg", "Lisbon", "Oslo", "Vienna", "Munich", "Porto", "Zurich"]
MESSAGES = [
    "the posters from last time a bit warmer",
    "Die Plakate vom letzten Mal etwas wärmer",
    "Make that blue",
    "Which resolutions does the video model support?",
    "Create a poster series for the winter market in Oslo",
    "Generate an image of a lighthouse",
    "the sneakers product photos on a white background",
    "Mach das Logo etwas runder",
]


def goal(i: int) -> str:
    return f"{SUBJECTS[i % len(SUBJECTS)]} ({PLACES[i // len(SUBJECTS) % len(PLACES)]} #{i})"


async def run_size(n: int, embedder_name: Literal["usem", "fake"]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/bench.db"
        upgrade(url)
        db = Database(url)
        settings = Settings(data_dir=Path(tmp), database_url=url, model_provider="offline")
        provider = CountingProvider(OfflineModel())
        acts = RoutingActivities(
            db,
            provider,
            settings,
            embedder=get_embedder(Settings(embedder=embedder_name)),
            vectors=EdgeVectorIndex(Path(tmp) / "vectors"),
            clock=lambda: NOW,
        )
        async with db.session() as s:
            user, _ = await create_user(s, "bench")
        rows: list[dict[str, Any]] = [
            {
                "id": f"tsk_{i:08d}",
                "user_id": user.id,
                "kind": "persistent" if i % 3 else "lightweight",
                "status": "running" if i % 4 else "completed",
                "goal": goal(i),
                "summary": f"draft {i % 5 + 1} chosen",
                "language": "en",
                "turn": 1,
                "waiting_on": [],
                "created_at": NOW - timedelta(hours=n - i),
                "updated_at": NOW - timedelta(hours=n - i),
            }
            for i in range(n)
        ]
        async with db.session() as s:
            for start in range(0, n, 1000):
                await s.execute(insert(Task), rows[start : start + 1000])
        t0 = time.perf_counter()
        while True:  # what the lazy refresh does over time, done up front
            async with db.session() as s:
                if not await acts.index.refresh(s, user.id):
                    break
        index_s = time.perf_counter() - t0
        warm = MessageRow(id=new_id("msg"), user_id=user.id, text="hello", target={})
        async with db.session() as s:
            s.add(warm)
        await acts.route_message(RouteRequest(user.id, warm.id))  # first-call costs aside
        latencies: list[float] = []
        tokens: list[int] = []
        shown: list[int] = []
        for text in MESSAGES:
            async with db.session() as s:
                msg = MessageRow(id=new_id("msg"), user_id=user.id, text=text, target={})
                s.add(msg)
            before = len(provider.input_tokens)
            t = time.perf_counter()
            await acts.route_message(RouteRequest(user.id, msg.id))
            latencies.append(time.perf_counter() - t)
            tokens.extend(provider.input_tokens[before:])
            async with db.session() as s:
                rec = await s.get(RoutingRecord, msg.id)
                shown.append(len(rec.candidates) if rec else 0)
        await db.dispose()
        return {
            "tasks": n,
            "index_s": index_s,
            "tokens_mean": statistics.mean(tokens),
            "tokens_max": max(tokens),
            "candidates_max": max(shown),
            "p50_ms": statistics.median(latencies) * 1000,
            "max_ms": max(latencies) * 1000,
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,1000,10000")
    ap.add_argument("--embedder", default="usem", choices=["usem", "fake"])
    args = ap.parse_args()
    out = [asyncio.run(run_size(int(n), args.embedder)) for n in args.sizes.split(",") if n.strip()]
    head = (
        f"{'tasks':>7} {'index s':>8} {'tokens/decision':>16} {'max':>6} "
        f"{'candidates':>10} {'route p50 ms':>12} {'max ms':>8}"
    )
    sys.stdout.write(f"routing context (embedder {args.embedder}, {len(MESSAGES)} messages)\n")
    sys.stdout.write(head + "\n")
    for r in out:
        sys.stdout.write(
            f"{r['tasks']:>7} {r['index_s']:>8.1f} {r['tokens_mean']:>16.0f} "
            f"{r['tokens_max']:>6} {r['candidates_max']:>10} {r['p50_ms']:>12.1f} "
            f"{r['max_ms']:>8.1f}\n"
        )


if __name__ == "__main__":
    main()

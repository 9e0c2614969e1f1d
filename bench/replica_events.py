"""An event committed elsewhere → an SSE client of another api replica, on Postgres.

    .venv/bin/python bench/replica_events.py [--events 100]

Two `lomo api` processes on one fresh Postgres database, each of its own data directory
(no shared one-host relay), their streams' poll at two minutes. A client holds
`GET /v1/events` open on replica B. The bench process appends events (the worker's place)
one after another and measures each from the commit's start to the event on B's stream:
the trigger's NOTIFY, B's `LISTEN` session (lomo/bell_notify.py), the stream's read.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.support import HEADER, drop_pg, fresh_pg, machine, row
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.migrate import upgrade
from lomo.events import append_event
from tests.replica_support import SseReader, api_replica

WARMUP = 10


async def run(db_url: str, tmp: Path, n: int) -> list[float]:
    upgrade(db_url)
    db = Database(db_url)
    async with db.session() as s:
        user, token = await create_user(s, "bench")
    out: list[float] = []
    try:
        with api_replica(tmp, "a", db_url), api_replica(tmp, "b", db_url) as b:
            async with SseReader(b, token) as stream:
                await asyncio.sleep(1)  # B's listening session is up
                for i in range(WARMUP + n):
                    t0 = time.perf_counter()
                    async with db.session() as s:
                        await append_event(s, user.id, "probe", {"n": i})
                    while len(stream.seqs) <= i:  # noqa: ASYNC110 (the reader fills it)
                        await asyncio.sleep(0.0005)
                    if i >= WARMUP:
                        out.append((time.perf_counter() - t0) * 1000)
    finally:
        await db.dispose()
    return out


def main(n: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lomo-replicas-"))
    _, url = fresh_pg("lomo_rep")
    try:
        got = asyncio.run(run(url, tmp, n))
    finally:
        drop_pg(url)
    lines = [HEADER, row("commit elsewhere → SSE event on replica B (NOTIFY)", got, "")]
    sys.stdout.write("\n".join([*lines, f"machine: {machine()}"]) + "\n")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--events", type=int, default=100)
    main(p.parse_args().events)

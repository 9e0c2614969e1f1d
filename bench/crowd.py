"""Many people at once across several workers and api replicas, on Postgres.

    .venv/bin/python bench/crowd.py [--people 200] [--workers 3] [--apis 2] [--kill-after 0.25]

Starts `lomo up --workers N --apis M` on a fresh Postgres database (LOMO_BENCH_PG, default
the local `test` server's admin URL), creates the people, and runs two waves of one
picture request each, spread over the api replicas:

- **steady**: every person at once; nothing is killed.
- **worker killed**: the same again with new people; once the given share of the wave has
  finished, one worker is SIGKILLed (the supervisor starts it again).

Per wave: throughput (pictures finished per minute), p50/p99/max from the message to the task's
completion (both stamps are the database's own), people whose task did not finish (lost),
and duplicate orders (more than one generation order for a task, or more than one
`settle` ledger entry for an order).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = os.environ.get("LOMO_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
SUBJECTS = ["red fox", "blue whale", "green frog", "yellow kite", "purple owl", "grey cat"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fresh_database() -> tuple[str, str]:
    """(database name, SQLAlchemy URL) of a new empty database."""
    name = f"lomo_crowd_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    return name, f"{base}/{name}"


def drop_database(name: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_stack(tmp: Path, db_url: str, workers: int, apis: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOMO_")}
    env.update(
        LOMO_DATA_DIR=str(tmp),
        LOMO_DATABASE_URL=db_url,
        LOMO_API_PORT=str(free_port()),
        LOMO_SIM_PORT=str(free_port()),
        LOMO_TEMPORAL_PORT=str(free_port()),
        LOMO_TEMPORAL_UI_PORT=str(free_port()),
        LOMO_MEMORY_PORT=str(free_port()),
        LOMO_WORKER_METRICS_PORT="0",
        LOMO_SIM_SPEED="0.2",  # a picture job of about a second, as a fast upstream
        LOMO_OFFLINE_STREAM_CHARS_PER_SECOND="0",
        LOMO_RATE_LIMIT_PER_MINUTE="100000",
    )
    out = (tmp / "up.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "up", "--workers", str(workers), "--apis", str(apis)],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=out,
        start_new_session=True,
    )


async def wait_stack(tmp: Path, proc: subprocess.Popen[bytes], apis: int) -> dict[str, Any]:
    """stack.json once every api replica answers ready."""
    stack_file = tmp / "stack.json"
    async with httpx.AsyncClient(timeout=5) as http:
        for _ in range(600):
            if proc.poll() is not None:
                raise RuntimeError(f"lomo up exited with {proc.returncode}: see {tmp}/up.log")
            if stack_file.exists():
                stack: dict[str, Any] = json.loads(stack_file.read_text())
                urls = stack.get("api_urls", [])
                if len(urls) == apis and await _all_ready(http, urls):
                    return stack
            await asyncio.sleep(0.5)
    raise TimeoutError("the stack did not become ready")


async def _all_ready(http: httpx.AsyncClient, urls: list[str]) -> bool:
    try:
        got = await asyncio.gather(*(http.get(f"{u}/readyz") for u in urls))
    except httpx.HTTPError:
        return False
    return all(r.status_code == 200 for r in got)


async def add_people(http: httpx.AsyncClient, stack: dict[str, Any], n: int) -> list[str]:
    admin = {"Authorization": f"Bearer {stack['admin_token']}"}
    url = stack["api_urls"][0]
    tokens = []
    for i in range(n):
        r = await http.post(f"{url}/v1/admin/users", json={"name": f"p{i}"}, headers=admin)
        r.raise_for_status()
        tokens.append(r.json()["token"])
    return tokens


@dataclass
class Wave:
    name: str
    people: int
    seconds: float
    latencies: list[float]
    lost: int
    duplicate_orders: int
    killed: str = ""

    def row(self) -> str:
        per_min = len(self.latencies) / self.seconds * 60 if self.seconds else 0.0
        p50 = statistics.median(self.latencies) if self.latencies else float("nan")
        p99 = _percentile(self.latencies, 0.99)
        top = max(self.latencies, default=float("nan"))
        return (
            f"| {self.name} | {self.people} | {len(self.latencies)} | {per_min:.0f} | "
            f"{p50:.1f} | {p99:.1f} | {top:.1f} | {self.lost} | {self.duplicate_orders} |"
        )


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def send_all(http: httpx.AsyncClient, urls: list[str], tokens: list[str]) -> list[str]:
    """One picture request per person, spread over the replicas; the message ids."""

    async def one(i: int, token: str) -> str:
        text = f"Generate an image of a {SUBJECTS[i % len(SUBJECTS)]} number {i}"
        r = await http.post(
            f"{urls[i % len(urls)]}/v1/messages",
            json={"text": text},
            headers={"Authorization": f"Bearer {token}"},
        )
        r.raise_for_status()
        return str(r.json()["message_id"])

    return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tokens))))


SETTLED_SQL = """
SELECT m.id, t.status, EXTRACT(EPOCH FROM (t.updated_at - m.created_at))
FROM messages m LEFT JOIN tasks t ON t.id = m.task_id
WHERE m.id = ANY(%s)
"""
DUPLICATES_SQL = """
SELECT
  (SELECT count(*) FROM (SELECT task_id FROM generation_orders WHERE task_id = ANY(%s)
     GROUP BY task_id HAVING count(*) > 1) a)
  +
  (SELECT count(*) FROM (SELECT order_id FROM ledger_entries
     WHERE kind = 'settle' AND task_id = ANY(%s) GROUP BY order_id HAVING count(*) > 1) b)
"""


def settled(pg: str, message_ids: list[str]) -> dict[str, tuple[str | None, float | None]]:
    with psycopg.connect(pg) as conn:
        rows = conn.execute(SETTLED_SQL, (message_ids,)).fetchall()
    return {r[0]: (r[1], float(r[2]) if r[2] is not None else None) for r in rows}


def duplicates(pg: str, message_ids: list[str]) -> int:
    with psycopg.connect(pg) as conn:
        tasks = [
            r[0]
            for r in conn.execute(
                "SELECT task_id FROM messages WHERE id = ANY(%s) AND task_id IS NOT NULL",
                (message_ids,),
            )
        ]
        got = conn.execute(DUPLICATES_SQL, (tasks, tasks)).fetchone()
    return int(got[0]) if got else 0


async def run_wave(
    name: str,
    http: httpx.AsyncClient,
    stack: dict[str, Any],
    pg: str,
    tokens: list[str],
    kill_after: float | None,
    within: float,
) -> Wave:
    t0 = time.monotonic()
    ids = await send_all(http, stack["api_urls"], tokens)
    killed = ""
    done: dict[str, float] = {}
    while time.monotonic() - t0 < within and len(done) < len(ids):
        await asyncio.sleep(1)
        for mid, (status, took) in settled(pg, ids).items():
            if status in ("completed", "failed") and took is not None and mid not in done:
                done[mid] = took if status == "completed" else -1.0
        if kill_after is not None and not killed and len(done) >= kill_after * len(ids):
            killed = kill_a_worker(stack)
    seconds = time.monotonic() - t0
    ok = [v for v in done.values() if v >= 0]
    return Wave(name, len(ids), seconds, ok, len(ids) - len(ok), duplicates(pg, ids), killed)


def kill_a_worker(stack: dict[str, Any]) -> str:
    """SIGKILLs the second worker (the first if there is one only); its name."""
    pids: dict[str, int] = stack["pids"]
    names = sorted(n for n in pids if n.startswith("worker"))
    victim = names[1] if len(names) > 1 else names[0]
    os.kill(pids[victim], signal.SIGKILL)
    print(f"  SIGKILLed {victim} (pid {pids[victim]})", flush=True)
    return victim


async def main(people: int, workers: int, apis: int, kill_after: float, within: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lomo-crowd-"))
    db_name, db_url = fresh_database()
    pg = PG_ADMIN.rsplit("/", 1)[0] + f"/{db_name}"
    proc = start_stack(tmp, db_url, workers, apis)
    try:
        stack = await wait_stack(tmp, proc, apis)
        limits = httpx.Limits(max_connections=400)
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:
            waves = []
            for name, kill in (("steady", None), ("worker killed", kill_after)):
                tokens = await add_people(http, stack, people)
                stack = json.loads((tmp / "stack.json").read_text())  # current pids
                waves.append(await run_wave(name, http, stack, pg, tokens, kill, within))
                print(f"  wave {name} done in {waves[-1].seconds:.0f} s", flush=True)
        print(f"\n{workers} workers, {apis} api replicas, Postgres; one picture per person\n")
        print(
            "| wave | people | finished | per minute | p50 s | p99 s | max s | lost "
            "| duplicate orders |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for w in waves:
            print(w.row())
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        drop_database(db_name)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--people", type=int, default=200)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--apis", type=int, default=2)
    p.add_argument("--kill-after", type=float, default=0.25, help="share finished before kill")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per wave")
    a = p.parse_args()
    asyncio.run(main(a.people, a.workers, a.apis, a.kill_after, a.timeout))

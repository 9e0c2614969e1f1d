"""Callback → SSE: from the upstream's signed callback POST until a connected event-stream
client has the event.

    .venv/bin/python bench/callback_sse.py [--callbacks 200]

The embedded stack's api as its own process (SQLite DB, dev server on a SQLite file); one
person with an order whose job is running upstream; a client holds `GET /v1/events` open;
the bench posts signed progress callbacks one after another (as the simulator does) and
measures each from the POST's start to the `generation.progress` event on the stream. The
api wakes its streams when a transaction that appended an event for their person commits
(lomo/events.py `BELL`); without that they poll every 0.25 s.

The second and third rows measure an event another process commits (as the worker writes a
reply or a task's status): this bench process appends it to the same SQLite DB, from the
commit's start to the event on the stream; once with the cross-process bell
(lomo/bell_relay.py), once without it (the streams' poll alone), alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.support import HEADER, Embedded, machine, row
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.models import GenerationOrder, Task
from lomo.events import append_event, bell_relay
from lomo.ids import new_id
from lomo.settings import Settings
from lomo.signing import sign

WARMUP = 10


async def run(stack: Embedded, callbacks: int) -> list[str]:
    db = Database(stack.db_url)
    async with db.session() as s:
        user, token = await create_user(s, "bench")
        task = Task(id=new_id("tsk"), user_id=user.id, kind="lightweight", status="running")
        s.add(task)
        await s.flush()
        order = GenerationOrder(
            id=new_id("ord"),
            workspace_id=user.id,
            task_id=task.id,
            idempotency_key=f"{task.id}:1:1:0",
            kind="image",
            model="bench",
            params={},
            upstream_job_id="job-bench",
            status="running",
            progress=0.0,
            last_seq=-1,
        )
        s.add(order)
    await db.dispose()
    auth = {"Authorization": f"Bearer {token}"}
    seen: dict[float, float] = {}  # progress → when the stream had it
    times: list[float] = []
    # The api process generated this install's secret into the data dir (lomo/install.py).
    secret = (stack.tmp / "callback_secret").read_text().strip()
    async with httpx.AsyncClient(base_url=stack.api_url, timeout=30) as http:
        listener = asyncio.create_task(
            _listen(http, auth, "generation.progress", lambda d: round(d["progress"], 6), seen)
        )
        await asyncio.sleep(1)
        for n in range(WARMUP + callbacks):
            progress = round((n + 1) / (WARMUP + callbacks + 1), 6)
            body = json.dumps(
                {"job_id": "job-bench", "status": "running", "progress": progress, "seq": n}
            ).encode()
            headers = {
                "x-lomo-signature": sign(secret, body),
                "content-type": "application/json",
            }
            t0 = time.perf_counter()
            r = await http.post("/v1/generation/callbacks", content=body, headers=headers)
            assert r.status_code == 200 and r.json()["changed"], r.text
            while progress not in seen:  # noqa: ASYNC110 (the listener fills it)
                await asyncio.sleep(0.0005)
            if n >= WARMUP:
                times.append((seen[progress] - t0) * 1000)
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        other = await _other_process(stack, user.id, {}, http, auth)
    return [
        row("callback POST → SSE event", times, "target p50 ≤ 50 ms"),
        row("another process's commit → SSE event, bell relay", other[True], ""),
        row("another process's commit → SSE event, poll only", other[False], "before the relay"),
    ]


async def _other_process(
    stack: Embedded,
    user_id: str,
    seen: dict[int, float],
    http: httpx.AsyncClient,
    auth: dict[str, str],
    n: int = 100,
) -> dict[bool, list[float]]:
    """Events appended by this process (the worker's place) with and without the relay."""

    dbs = {
        True: Database(stack.db_url, relay=bell_relay(Settings(data_dir=stack.tmp).bell_dir)),
        False: Database(stack.db_url),
    }
    out: dict[bool, list[float]] = {True: [], False: []}
    listener = asyncio.create_task(_listen(http, auth, "probe", lambda d: d["n"], seen))
    await asyncio.sleep(1)
    try:
        for i in range(2 * (WARMUP + n)):
            relayed = i % 2 == 0
            t0 = time.perf_counter()
            async with dbs[relayed].session() as s:
                await append_event(s, user_id, "probe", {"n": i})
            while i not in seen:  # noqa: ASYNC110 (the listener fills it)
                await asyncio.sleep(0.0005)
            if i >= 2 * WARMUP:
                out[relayed].append((seen[i] - t0) * 1000)
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        for db in dbs.values():
            await db.dispose()
    return out


async def _listen(
    http: httpx.AsyncClient,
    auth: dict[str, str],
    type_: str,
    key: Callable[[dict[str, Any]], Any],
    seen: dict[Any, float],
) -> None:
    """Hold `GET /v1/events` open; note when each event of `type_` arrived, by `key`."""
    async with http.stream("GET", "/v1/events", headers=auth) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                ev = json.loads(line[6:])
                if ev["type"] == type_:
                    seen[key(ev["data"])] = time.perf_counter()


def main(callbacks: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lomo-sse-"))
    with Embedded(tmp, worker=False) as stack:
        lines = [HEADER, *asyncio.run(run(stack, callbacks))]
    sys.stdout.write("\n".join([*lines, f"machine: {machine()}"]) + "\n")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--callbacks", type=int, default=200)
    main(p.parse_args().callbacks)

"""The person's side of bench/agent_step.py, in its own process as the api's SSE stream is
(`lomo up` runs the api and the worker as two processes).

    python bench/step_watch.py POSTGRES_URL BELL_DIR USER_ID

It reads the person's event log as `GET /v1/events` does: woken by the bell the worker's
commits ring across processes (lomo/bell_relay.py), with a 50 ms poll for a missed ring.
For each task status event `waiting_user` it prints `seq seen cpu`: `seen` is
`time.perf_counter()` when the event was read (the system's monotonic clock, the same in
every process here) and `cpu` this process's CPU seconds so far, so the bench counts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lomo.events import BELL, bell_relay

POLL_S = 0.05


async def watch(pg: str, bell_dir: str, user_id: str) -> None:
    relay = bell_relay(Path(bell_dir))
    if not relay.listen():
        raise SystemExit(f"cannot listen in {bell_dir}")
    conn: psycopg.AsyncConnection[Any] = await psycopg.AsyncConnection.connect(pg, autocommit=True)
    seq = 0
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    try:
        while True:
            bell = BELL.waiter(user_id)
            try:
                cur = await conn.execute(
                    "SELECT seq, type, data FROM events WHERE user_id = %s AND seq > %s"
                    " ORDER BY seq",
                    (user_id, seq),
                )
                for got_seq, type_, data in await cur.fetchall():
                    seq = got_seq
                    data = data if isinstance(data, dict) else json.loads(data)
                    if type_ == "task.status" and data.get("status") == "waiting_user":
                        now, cpu = time.perf_counter(), time.process_time()
                        sys.stdout.write(f"{got_seq} {now} {cpu}\n")
                        sys.stdout.flush()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(bell.wait(), POLL_S)
            finally:
                BELL.forget(user_id, bell)
    finally:
        relay.close()
        await conn.close()


if __name__ == "__main__":
    asyncio.run(watch(*sys.argv[1:4]))

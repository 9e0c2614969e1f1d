"""Durable message accept on the embedded stack: messages/s and latency of POST /v1/messages.

    .venv/bin/python bench/message_accept.py [--clients 50] [--users 20] [--messages 1000]

The embedded stack's parts as their own processes (dev server on a SQLite file, SQLite DB,
api, a worker with the offline model routing every message meanwhile, unless
`--no-worker`). `--clients`
concurrent clients, spread over `--users` people, post `--messages` messages in all; a
POST answers 202 once the message is stored as evidence and handed to Temporal
(signal-with-start of the person's main thread, and of the memory workflow), so its latency
is the durable accept. The messages are capability questions the main thread answers
itself, so the worker's load is routing, not generation.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.support import HEADER, Embedded, cpu_seconds, machine, row
from lomo.auth import create_user
from lomo.db.engine import Database

TEXTS = ("What can you do?", "Was kannst du?", "Which formats can you make?")


async def run(stack: Embedded, clients: int, users: int, messages: int, worker: bool) -> list[str]:
    db = Database(stack.db_url)
    tokens = []
    async with db.session() as s:
        for i in range(users):
            _, token = await create_user(s, f"bench-{i}")
            tokens.append(token)
    await db.dispose()
    per_client = messages // clients
    times: list[float] = []
    refused = resent = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=stack.api_url, timeout=60, limits=limits) as http:

        async def client(c: int) -> None:
            nonlocal refused, resent
            auth = {"Authorization": f"Bearer {tokens[c % users]}"}
            for n in range(per_client):
                # The client's message id makes a resend after a dropped connection (the
                # server closing an idle keep-alive just as it is reused) the same message.
                body = {"text": TEXTS[(c + n) % len(TEXTS)], "client_message_id": f"{c}-{n}"}
                t0 = time.perf_counter()
                for _attempt in range(3):
                    try:
                        r = await http.post("/v1/messages", json=body, headers=auth)
                        break
                    except (httpx.ReadError, httpx.RemoteProtocolError):
                        resent += 1
                else:
                    refused += 1
                    continue
                if r.status_code != 202:
                    refused += 1
                    continue
                times.append((time.perf_counter() - t0) * 1000)

        # One warm-up message per person: the first signal-with-start creates workflows.
        for token in tokens:
            auth = {"Authorization": f"Bearer {token}"}
            r = await http.post("/v1/messages", json={"text": TEXTS[0]}, headers=auth)
            assert r.status_code == 202, r.text
        api_pid = stack.procs[1].pid
        t0, c0 = time.perf_counter(), cpu_seconds(api_pid)
        await asyncio.gather(*(client(c) for c in range(clients)))
        took = time.perf_counter() - t0
        api_cpu = (cpu_seconds(api_pid) - c0) * 1000 / max(1, len(times))
    rate = len(times) / took
    return [
        row(
            f"accept, {clients} clients over {users} people"
            + (", worker routing meanwhile" if worker else ", no worker"),
            times,
            f"{rate:.0f} msg/s over {len(times)} messages in {took:.1f} s; "
            f"api CPU {api_cpu:.1f} ms/message; "
            f"{refused} not 202, {resent} resent after a dropped connection; "
            "target ≥ 50 msg/s, p99 ≤ 200 ms",
        )
    ]


def main(clients: int, users: int, messages: int, worker: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lomo-accept-"))
    with Embedded(tmp, worker=worker) as stack:
        lines = [HEADER, *asyncio.run(run(stack, clients, users, messages, worker))]
    sys.stdout.write("\n".join([*lines, f"machine: {machine()}"]) + "\n")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--messages", type=int, default=1000)
    p.add_argument("--no-worker", action="store_true", help="the api and Temporal alone")
    a = p.parse_args()
    main(a.clients, a.users, a.messages, not a.no_worker)

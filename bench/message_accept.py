"""Durable message accept on the embedded stack: messages/s and latency of POST /v1/messages.

    .venv/bin/python bench/message_accept.py [--clients 50] [--users 20] [--messages 1000]
                                             [--rate 50] [--no-worker]

The embedded stack's parts as their own processes (dev server on a SQLite file, SQLite DB,
api, a worker with the offline model routing every message meanwhile, unless
`--no-worker`). `--clients`
concurrent clients, spread over `--users` people, post `--messages` messages in all; a
POST answers 202 once the message is stored as evidence and handed to Temporal
(signal-with-start of the person's main thread, and of the memory workflow), so its latency
is the durable accept. The messages are capability questions the main thread answers
itself, so the worker's load is routing, not generation.

Two phases: an open loop offering `--rate` msg/s in all (the latency at that load), then a
closed loop (each client sends again once answered: the most the stack takes). With 50
clients in a closed loop the latency is 50 / throughput by Little's law, so it measures
capacity, not the latency at the target rate.
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


def _cpu(stack: Embedded) -> dict[str, float]:
    """CPU seconds so far of each part: the dev server, the api and the worker."""
    return {name: cpu_seconds(p.pid) for name, p in zip(stack.parts, stack.procs, strict=True)}


async def _post(
    http: httpx.AsyncClient, auth: dict[str, str], body: dict[str, str]
) -> tuple[int, int]:
    """(status, resends): a connection the server dropped as it was reused is sent again
    with the same client message id, which makes it the same message."""
    for attempt in range(3):
        try:
            r = await http.post("/v1/messages", json=body, headers=auth)
            return r.status_code, attempt
        except (httpx.ReadError, httpx.RemoteProtocolError):
            continue
    return 0, 3


async def _phase(
    stack: Embedded,
    http: httpx.AsyncClient,
    tokens: list[str],
    clients: int,
    messages: int,
    rate: float | None,
    tag: str,
) -> str:
    """`clients` clients post `messages` in all. With `rate`, each client sends on its own
    schedule (open loop: rate / clients messages per second each, so a slow answer does
    not slow the offered load); without, each sends its next message as soon as the last
    is answered (closed loop: the most the stack takes)."""
    per_client = messages // clients
    times: list[float] = []
    refused = resent = 0

    async def client(c: int) -> None:
        nonlocal refused, resent
        auth = {"Authorization": f"Bearer {tokens[c % len(tokens)]}"}
        start = time.perf_counter() + (c / clients) * (clients / rate if rate else 0)
        for n in range(per_client):
            if rate:
                due = start + n * clients / rate
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
            body = {"text": TEXTS[(c + n) % len(TEXTS)], "client_message_id": f"{tag}-{c}-{n}"}
            t0 = time.perf_counter()
            status, again = await _post(http, auth, body)
            resent += again
            if status != 202:
                refused += 1
                continue
            times.append((time.perf_counter() - t0) * 1000)

    c0, t0 = _cpu(stack), time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    took = time.perf_counter() - t0
    c1 = _cpu(stack)
    n = max(1, len(times))
    cpu = ", ".join(f"{k} {(c1[k] - c0[k]) * 1000 / n:.1f}" for k in c0)
    mode = f"open loop at {rate:.0f} msg/s offered" if rate else "closed loop"
    return row(
        f"{mode}, {clients} clients over {len(tokens)} people"
        + (", worker routing meanwhile" if stack.with_worker else ", no worker"),
        times,
        f"{len(times) / took:.0f} msg/s taken over {len(times)} messages in {took:.1f} s; "
        f"CPU ms/message: {cpu}; {refused} not 202, {resent} resent",
    )


async def run(stack: Embedded, clients: int, users: int, messages: int, rate: float) -> list[str]:
    db = Database(stack.db_url)
    tokens = []
    async with db.session() as s:
        for i in range(users):
            _, token = await create_user(s, f"bench-{i}")
            tokens.append(token)
    await db.dispose()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=stack.api_url, timeout=60, limits=limits) as http:
        # One warm-up message per person: the first signal-with-start creates workflows.
        for token in tokens:
            auth = {"Authorization": f"Bearer {token}"}
            r = await http.post("/v1/messages", json={"text": TEXTS[0]}, headers=auth)
            assert r.status_code == 202, r.text
        return [
            await _phase(stack, http, tokens, clients, messages, rate, "open"),
            await _phase(stack, http, tokens, clients, messages, None, "closed"),
        ]


def main(clients: int, users: int, messages: int, rate: float, worker: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lomo-accept-"))
    with Embedded(tmp, worker=worker) as stack:
        lines = [HEADER, *asyncio.run(run(stack, clients, users, messages, rate))]
    sys.stdout.write("\n".join([*lines, f"machine: {machine()}"]) + "\n")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--messages", type=int, default=1000)
    p.add_argument("--rate", type=float, default=50.0, help="offered msg/s of the open loop")
    p.add_argument("--no-worker", action="store_true", help="the api and Temporal alone")
    a = p.parse_args()
    main(a.clients, a.users, a.messages, a.rate, not a.no_worker)

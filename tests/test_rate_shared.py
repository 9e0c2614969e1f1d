"""The address limit (failed tokens per client address) counted across api replicas, in the
database (api/rate_store.py), on both databases."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import httpx
from starlette.types import Receive, Scope, Send

from api.rate_store import SharedBuckets
from api.ratelimit import ADDRESS_BURST, ADDRESS_PER_MINUTE, RateLimit
from lomo.auth import create_user
from lomo.db.engine import Database
from tests.replica_support import api_replica

GUESSES = 50  # split over two replicas: 25 each, under either's own count of 30


async def test_a_bucket_spends_its_burst_exactly_once_under_concurrent_takers(
    db_url: str,
) -> None:
    """Two processes' worth of takers at once (two engines): the UPSERT is atomic, so the
    burst passes exactly and no more (at one take a minute nothing refills meanwhile)."""
    one, two = Database(db_url), Database(db_url)
    try:
        buckets = [SharedBuckets(d, per_minute=1, burst=10) for d in (one, two)]
        got = await asyncio.gather(*(buckets[i % 2].take("addr:x") for i in range(30)))
        assert sum(1 for w in got if w == 0) == 10
        # The refused are told the truth: the next take fits in about a minute.
        assert all(55 < w <= 60 for w in got if w), got
        assert 55 < await buckets[0].wait("addr:x") <= 60
        assert await buckets[1].wait("addr:other") == 0
        assert await buckets[1].take("addr:other") == 0
    finally:
        await one.dispose()
        await two.dispose()


async def test_a_bucket_refills_at_the_rate(db_url: str) -> None:
    db = Database(db_url)
    try:
        b = SharedBuckets(db, per_minute=60, burst=2)  # one take a second
        assert [await b.take("k") for _ in range(2)] == [0.0, 0.0]
        # Takes until one is refused (on a loaded machine a second may pass meanwhile).
        for _ in range(10):
            if wait := await b.take("k"):
                break
        assert 0 < wait <= 1.0
        await asyncio.sleep(wait + 0.05)
        assert await b.take("k") == 0.0
    finally:
        await db.dispose()


async def test_failed_tokens_are_counted_across_two_replicas(tmp_path: Path, db_url: str) -> None:
    db = Database(db_url)
    async with db.session() as s:
        _, token = await create_user(s, "ada")
    await db.dispose()
    good = {"Authorization": f"Bearer {token}"}
    bad = {"Authorization": "Bearer lomo_guess"}
    with api_replica(tmp_path, "a", db_url) as a, api_replica(tmp_path, "b", db_url) as b:
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.get(f"{a}/v1/tasks", headers=good)).status_code == 200
            started = time.monotonic()
            answers = [
                (await http.get(f"{(a, b)[i % 2]}/v1/tasks", headers=bad)).status_code
                for i in range(GUESSES)
            ]
            # No token at all counts against the same address, on either replica.
            bare = [(await http.get(f"{url}/v1/tasks")).status_code for url in (a, b)]
            elapsed = time.monotonic() - started
            assert answers[:ADDRESS_BURST] == [401] * ADDRESS_BURST
            # Each replica alone would have let all 50 through; together they let the
            # burst through and what refilled meanwhile (one each 2 s), no more.
            refilled = math.ceil(elapsed * ADDRESS_PER_MINUTE / 60)
            passed = (answers + bare).count(401)
            assert ADDRESS_BURST <= passed <= ADDRESS_BURST + refilled, (answers, bare, elapsed)
            assert set(answers + bare) == {401, 429}
            assert 429 in answers[ADDRESS_BURST::2] and 429 in answers[ADDRESS_BURST + 1 :: 2]
            # A token replica A accepted proves someone: its person is not locked out there.
            assert (await http.get(f"{a}/v1/tasks", headers=good)).status_code == 200


async def test_while_the_store_fails_each_replica_still_counts_on_its_own() -> None:
    """A database nobody answers at: no 500, and the process's own count refuses."""

    async def unauthorized(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    gone = Database("postgresql+psycopg://postgres@127.0.0.1:1/gone")
    shared = SharedBuckets(gone, ADDRESS_PER_MINUTE, ADDRESS_BURST)
    app = RateLimit(unauthorized, per_minute=3000, burst=300, shared=shared)
    transport = httpx.ASGITransport(app=app, client=("203.0.113.5", 1))
    async with httpx.AsyncClient(transport=transport, base_url="http://lomo") as c:
        started = time.monotonic()
        answers = [(await c.get("/v1/tasks")).status_code for _ in range(ADDRESS_BURST + 5)]
    refilled = math.ceil((time.monotonic() - started) * ADDRESS_PER_MINUTE / 60)
    assert answers[:ADDRESS_BURST] == [401] * ADDRESS_BURST
    assert answers.count(401) <= ADDRESS_BURST + refilled and 429 in answers, answers
    await gone.dispose()

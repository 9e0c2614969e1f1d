"""Every limit of the api over real HTTP, on both databases: an over-limit request gets a
clear 4xx with the documented error body (413 `too_large`, 429 `rate_limited` with
Retry-After) and stores nothing, not half of anything: no message, object, blob or event.
The limits: request body size (declared and chunked), message length, upload size, rate
per bearer token, open event streams per person."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from api.app import create_app
from api.limits import body_limit
from api.ratelimit import TokenBuckets
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.models import Event, MessageRow, ObjectVersion, WorkObject
from lomo.settings import Settings
from tests.helpers import ThreadServer, eventually

UPLOAD = 3000  # bytes of one asset
MESSAGE = 200  # characters of one message
BURST = 6
STREAMS = 2


@dataclass
class Api:
    http: httpx.AsyncClient
    db: Database
    settings: Settings
    a: dict[str, str]
    b: dict[str, str]

    async def stored(self) -> dict[str, int]:
        """Counts of everything a request could leave behind, with the asset files."""
        counts = {}
        async with self.db.session() as s:
            for model in (MessageRow, WorkObject, ObjectVersion, Event):
                counts[model.__name__] = int(
                    await s.scalar(select(func.count()).select_from(model)) or 0
                )
        assets = self.settings.resolved_asset_dir
        counts["files"] = sum(1 for p in assets.rglob("*") if p.is_file()) if assets.exists() else 0
        return counts


@pytest.fixture
async def api(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    task_queue: str,
) -> AsyncIterator[Api]:
    """The real api on a real database; `indirect` params override settings."""
    overrides = {"rate_limit_per_minute": 0, **getattr(request, "param", {})}
    settings = Settings(
        data_dir=tmp_path,
        database_url=db_url,
        temporal_address=temporal_server,
        task_queue=task_queue,
        model_provider="offline",
        max_upload_bytes=UPLOAD,
        max_message_chars=MESSAGE,
        rate_limit_burst=BURST,
        max_sse_per_person=STREAMS,
        **overrides,
    )
    db = Database(db_url)
    async with db.session() as s:
        _, token_a = await create_user(s, "alice")
        _, token_b = await create_user(s, "bob")
    with ThreadServer(create_app(settings)) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as http:
            yield Api(
                http,
                db,
                settings,
                {"Authorization": f"Bearer {token_a}"},
                {"Authorization": f"Bearer {token_b}"},
            )
    await db.dispose()


def assert_error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body["error"] == code and isinstance(body["detail"], str) and body["detail"], body
    return body


def _asset(n: int) -> dict[str, Any]:
    data = base64.b64encode(b"\x89PNG" + b"x" * (n - 4)).decode()
    return {
        "type": "asset",
        "name": "a",
        "content": {"media_type": "image/png", "data_base64": data},
    }


async def _chunks(total: int) -> AsyncIterator[bytes]:
    sent = 0
    while sent < total:
        yield b" " * min(8192, total - sent)
        sent += 8192


async def test_sizes_over_the_limit_are_413_and_store_nothing(api: Api) -> None:
    """Body, upload and message: one over is refused whole; one at the limit is taken."""
    before = await api.stored()
    limit = body_limit(UPLOAD)
    h = api.a
    too_big = b'{"type": "document", "name": "d", "content": {"text": "' + b"x" * limit + b'"}}'
    r = await api.http.post("/v1/objects", content=too_big, headers=h)  # declared length
    assert assert_error(r, 413, "too_large")["limit_bytes"] == limit
    r = await api.http.post("/v1/objects", content=_chunks(limit + 1), headers=h)  # chunked
    assert assert_error(r, 413, "too_large")["limit_bytes"] == limit
    r = await api.http.post("/v1/objects", json=_asset(UPLOAD + 1), headers=h)  # upload
    assert assert_error(r, 413, "too_large")["limit_bytes"] == UPLOAD
    r = await api.http.post("/v1/messages", json={"text": "m" * (MESSAGE + 1)}, headers=h)
    assert assert_error(r, 413, "too_large")["limit_chars"] == MESSAGE
    # A replaced asset over the limit leaves the object at its old version.
    ok = await api.http.post("/v1/objects", json=_asset(UPLOAD), headers=h)
    assert ok.status_code == 201, ok.text
    oid = ok.json()["object_id"]
    after_one = await api.stored()
    assert after_one["WorkObject"] == before["WorkObject"] + 1 and after_one["files"] == 1
    over = {"base_version": 1, "content": _asset(UPLOAD + 1)["content"]}
    assert_error(await api.http.put(f"/v1/objects/{oid}", json=over, headers=h), 413, "too_large")
    assert (await api.http.get(f"/v1/objects/{oid}", headers=h)).json()["version"] == 1
    assert await api.stored() == after_one
    # The message at the limit is accepted (the refusal above was the length, nothing else).
    r = await api.http.post("/v1/messages", json={"text": "m" * MESSAGE}, headers=h)
    assert r.status_code == 202, r.text
    assert (await api.stored())["MessageRow"] == before["MessageRow"] + 1


# One more request a minute after the burst: nothing refills within the test.
@pytest.mark.parametrize("api", [{"rate_limit_per_minute": 1}], indirect=True)
async def test_rate_per_token_is_429_with_retry_after(api: Api) -> None:
    before = await api.stored()
    for _ in range(BURST):
        assert (await api.http.get("/v1/tasks", headers=api.a)).status_code == 200
    r = await api.http.post("/v1/messages", json={"text": "one more"}, headers=api.a)
    body = assert_error(r, 429, "rate_limited")
    retry = int(r.headers["Retry-After"])
    assert retry == body["retry_after_seconds"] and 1 <= retry <= 60
    assert await api.stored() == before  # the refused message was never read
    # Another token has its own bucket; requests without a token are not counted.
    assert (await api.http.get("/v1/tasks", headers=api.b)).status_code == 200
    assert (await api.http.get("/healthz")).status_code == 200
    assert_error(await api.http.get("/v1/tasks", headers=api.a), 429, "rate_limited")


@pytest.mark.parametrize("api", [{"rate_limit_per_minute": 1}], indirect=True)
async def test_rate_is_counted_per_replica(api: Api) -> None:
    """The documented choice: a second api process on the same database keeps its own
    buckets, so behind N replicas a token gets up to N times the rate (README)."""
    with ThreadServer(create_app(api.settings)) as second:
        async with httpx.AsyncClient(base_url=second.url, timeout=30) as replica:
            for _ in range(BURST):
                assert (await api.http.get("/v1/tasks", headers=api.a)).status_code == 200
            assert_error(await api.http.get("/v1/tasks", headers=api.a), 429, "rate_limited")
            for _ in range(BURST):
                assert (await replica.get("/v1/tasks", headers=api.a)).status_code == 200
            assert_error(await replica.get("/v1/tasks", headers=api.a), 429, "rate_limited")


def test_token_bucket_refills_at_the_rate() -> None:
    """The bucket's arithmetic with an explicit clock: burst, then the rate, per key."""
    b = TokenBuckets(per_minute=60, burst=3)
    assert [b.take("k", now=0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert b.take("k", now=0.0) == pytest.approx(1.0)  # one token a second
    assert b.take("other", now=0.0) == 0.0
    assert b.take("k", now=0.5) == pytest.approx(0.5)
    assert b.take("k", now=1.0) == 0.0
    assert b.take("k", now=1.0) > 0
    assert [b.take("k", now=100.0) for _ in range(4)][-1] > 0  # refill stops at the burst


async def test_event_streams_per_person_are_429_until_one_closes(api: Api) -> None:
    async with AsyncExitStack() as streams:
        for _ in range(STREAMS):
            r = await streams.enter_async_context(
                api.http.stream("GET", "/v1/events", headers=api.b)
            )
            assert r.status_code == 200
        r = await api.http.get("/v1/events", headers=api.b)
        assert_error(r, 429, "rate_limited")
        assert int(r.headers["Retry-After"]) >= 1
        # Another person streams freely.
        r = await api.http.get("/v1/events", params={"once": "true"}, headers=api.a)
        assert r.status_code == 200
    # Closed streams give their slots back (when the server sees the disconnect).

    async def reopened() -> bool:
        r = await api.http.get("/v1/events", params={"once": "true"}, headers=api.b)
        return r.status_code == 200

    await eventually(reopened, within=20)

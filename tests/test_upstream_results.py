"""A generation job's result, as the worker collects it, against the real api (signed
callbacks) and simulator over HTTP: a result url off the upstream's origin is never
fetched and the order fails (refunded, as an upstream failure is); a result larger than
the upload cap is refused and nothing is stored; the asset's media type is the job kind's,
whatever Content-Type the upstream answers with. The books balance after each test (the
`money_env` teardown)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from temporalio.exceptions import ApplicationError

from activities.generation import GenerationActivities
from activities.types import OrderRef
from lomo.db.models import GenerationOrder, ObjectVersion, WorkObject
from lomo.settings import Settings
from lomo.signing import SIGNATURE_HEADER, sign
from money.orders import OFF_ORIGIN, on_upstream_origin
from tests.helpers import ThreadServer, eventually
from tests.test_money import Money, money_env

CALLBACKS = "/v1/generation/callbacks"
SMALL_CAP = 64  # bytes; the simulator's smallest image is far larger


@pytest.fixture
async def money(tmp_path: Path, db_url: str, temporal_server: str) -> AsyncIterator[Money]:
    async with money_env(tmp_path, db_url, temporal_server) as m:
        yield m


@pytest.fixture
async def capped(tmp_path: Path, db_url: str, temporal_server: str) -> AsyncIterator[Money]:
    async with money_env(tmp_path, db_url, temporal_server, max_upload_bytes=SMALL_CAP) as m:
        yield m


def _recording_server(hits: list[str]) -> Starlette:
    """Another origin on this machine: it serves a 'result' and records every request."""

    async def evil(request: Request) -> Response:
        hits.append(request.url.path)
        return Response(b"\x89PNG not yours", media_type="image/png")

    return Starlette(routes=[Route("/evil.png", evil)])


def _chunked_server() -> Starlette:
    """A body with no Content-Length: only counting the streamed bytes can stop it."""

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(64):
            yield b"x" * 16

    async def big(_: Request) -> Response:
        return StreamingResponse(chunks(), media_type="image/png")

    return Starlette(routes=[Route("/big.png", big)])


async def _order(m: Money) -> GenerationOrder:
    async with m.db.session() as s:
        o = await s.scalar(select(GenerationOrder).execution_options(populate_existing=True))
        assert o is not None
        return o


async def _finished_job(m: Money) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        jobs = await m.jobs()
        return jobs[0] if len(jobs) == 1 and jobs[0]["status"] == "succeeded" else None

    return dict(await eventually(done, within=30))


async def test_a_result_url_on_another_origin_is_never_fetched_and_the_order_fails(
    money: Money,
) -> None:
    m = money
    # Only the test's callback reaches the api: the simulator's own are dropped.
    assert (await m.sim.post("/sim/faults", json={"drop_callbacks": True})).status_code == 200
    res = await m.image(m.ctx())
    assert res.order_id
    job = await _finished_job(m)
    hits: list[str] = []
    with ThreadServer(_recording_server(hits)) as evil:
        order = await _order(m)
        report = {
            "job_id": job["job_id"],
            "status": "succeeded",
            "progress": 1.0,
            "seq": 99,
            "result_url": f"{evil.url}/evil.png",
            "idempotency_key": order.idempotency_key,
        }
        body = json.dumps(report).encode()
        secret = m.settings.callback_secret.get_secret_value()
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body)}
        r = await m.api.post(CALLBACKS, content=body, headers=headers)
        assert r.status_code == 200, r.text
        order = await _order(m)
        assert (order.status, order.error) == ("failed", OFF_ORIGIN)
        # Collection of a failed order fetches nothing; so does the poll that follows.
        acts = GenerationActivities(m.deps())
        assert (await acts.collect_generation(OrderRef(res.order_id))).status == "failed"
        assert (await acts.poll_generation(OrderRef(res.order_id))).status == "failed"
        assert hits == []
    assert await m.entries() == [("deposit", 2000), ("reserve", 4), ("refund", 4)]
    assert await m.count(WorkObject) == 0
    assert (await _order(m)).object_id is None


async def test_a_result_over_the_upload_cap_is_refused_and_nothing_stored(
    capped: Money,
) -> None:
    m = capped
    res = await m.image(m.ctx())
    assert res.order_id
    assert await m.settled(res.order_id) == "succeeded"
    order = await _order(m)
    assert order.result_url
    served = await m.http.get(order.result_url)  # the result really is over the cap
    assert len(served.content) > SMALL_CAP
    with pytest.raises(ApplicationError) as refused:
        await GenerationActivities(m.deps()).collect_generation(OrderRef(res.order_id))
    assert refused.value.non_retryable
    assert f"larger than the {SMALL_CAP}-byte upload limit" in str(refused.value)
    order = await _order(m)
    assert order.object_id is None and order.error and "upload limit" in order.error
    assert await m.count(WorkObject) == 0
    assert not [p for p in m.settings.resolved_asset_dir.rglob("*") if p.is_file()]
    # Charged when the upstream reported success, given back when the result was unusable:
    # once, however often collection is tried.
    with pytest.raises(ApplicationError):
        await GenerationActivities(m.deps()).collect_generation(OrderRef(res.order_id))
    assert await m.entries() == [
        ("deposit", 2000),
        ("reserve", 4),
        ("settle", 4),
        ("reverse", 4),
    ]
    budget = (await m.api.get("/v1/budget", headers=m.auth)).json()
    assert (budget["balance"], budget["spent"], budget["reserved"]) == (2000, 0, 0)
    # Undeclared length (chunked): the count of streamed bytes refuses it just the same.
    with ThreadServer(_chunked_server()) as chunked:
        with pytest.raises(ApplicationError, match="upload limit"):
            await GenerationActivities(m.deps())._download(res.order_id, f"{chunked.url}/big.png")


def test_the_upstream_origin_is_scheme_host_and_port() -> None:
    s = Settings(sim_url="http://127.0.0.1:8123")
    assert on_upstream_origin("http://127.0.0.1:8123/files/a.png", s)
    assert on_upstream_origin("HTTP://127.0.0.1:8123/files/a.png", s)
    for url in (
        "http://127.0.0.1:8124/files/a.png",  # another port
        "https://127.0.0.1:8123/files/a.png",  # another scheme
        "http://localhost:8123/files/a.png",  # another host name
        "http://127.0.0.1:8123@evil.test/a.png",  # userinfo: the host is evil.test
        "http://u@127.0.0.1:8123/a.png",  # credentials are not the upstream's to get
        "file:///etc/passwd",
        "/files/a.png",
        "",
        None,
    ):
        assert not on_upstream_origin(url, s), url
    default = Settings(sim_url="https://up.test")
    assert on_upstream_origin("https://up.test:443/r.png", default)
    assert not on_upstream_origin("http://up.test/r.png", default)


async def test_the_media_type_is_the_job_kinds_not_the_upstreams_content_type(
    money: Money,
) -> None:
    m = money
    await m.sim.post("/sim/faults", json={"result_content_type": "text/html"})
    res = await m.image(m.ctx())
    assert res.order_id
    assert await m.settled(res.order_id) == "succeeded"
    order = await _order(m)
    assert order.result_url
    served = await m.http.get(order.result_url)  # the upstream does claim HTML
    assert served.headers["content-type"].startswith("text/html")
    await GenerationActivities(m.deps()).collect_generation(OrderRef(res.order_id))
    order = await _order(m)
    assert order.object_id
    async with m.db.session() as s:
        version = await s.scalar(
            select(ObjectVersion).where(ObjectVersion.object_id == order.object_id)
        )
        assert version is not None and version.media_type == "image/png"

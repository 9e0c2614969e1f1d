"""Safe by default, against a hostile browser or client: an upload of a type a browser
would run is refused (415); asset bytes never run or render as the api's own page
(nosniff, attachment unless a plain image/video/audio, a sandboxing CSP); the page and the
API docs load nothing from elsewhere; a body over 256 KiB is refused except on the upload
routes; a stranger's body is refused unread; and one address's failed tokens hit a limit."""

from __future__ import annotations

import base64
import math
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI
from playwright.sync_api import expect, sync_playwright
from sqlalchemy import func, select
from starlette.types import Message

from api.app import create_app
from api.ratelimit import ADDRESS_BURST, ADDRESS_PER_MINUTE
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.models import WorkObject
from lomo.settings import Settings
from tests.helpers import ThreadServer
from tests.web_support import PageWatch, require_browser
from workspace.blobs import make_asset_store
from workspace.store import PERSON, create_asset

KIB = 1024


@pytest.fixture
async def app(tmp_path: Path, db_url: str) -> AsyncIterator[FastAPI]:
    settings = Settings(data_dir=tmp_path, database_url=db_url, model_provider="offline")
    yield create_app(settings)


@pytest.fixture
async def token(db_url: str) -> str:
    db = Database(db_url)
    async with db.session() as s:
        _, token = await create_user(s, "alice")
    await db.dispose()
    return token


def client(app: FastAPI, address: str = "203.0.113.7") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 4321))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


def _asset(media_type: str, data: bytes = b"\x89PNG....") -> dict[str, Any]:
    content = {"media_type": media_type, "data_base64": base64.b64encode(data).decode()}
    return {"type": "asset", "name": "a", "content": content}


def _error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    body: dict[str, Any] = r.json()
    assert body["error"] == code and body["detail"], body
    return body


async def _objects(app: FastAPI) -> int:
    async with app.state.db.session() as s:
        return int(await s.scalar(select(func.count()).select_from(WorkObject)) or 0)


SCRIPTABLE = [
    "image/svg+xml",
    "text/html",
    "TEXT/HTML; charset=utf-8",
    "application/xhtml+xml",
    "application/xml",
    "text/xml",
    "application/javascript",
]


async def test_scriptable_uploads_are_415_and_store_nothing(app: FastAPI, token: str) -> None:
    h = {"Authorization": f"Bearer {token}"}
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    async with client(app) as c:
        for media_type in SCRIPTABLE:
            r = await c.post("/v1/objects", json=_asset(media_type, svg), headers=h)
            assert "image/png" in _error(r, 415, "unsupported_media_type")["accepted"]
        assert await _objects(app) == 0
        ok = await c.post("/v1/objects", json=_asset("image/png"), headers=h)
        assert ok.status_code == 201, ok.text
        oid = ok.json()["object_id"]
        put = {"base_version": 1, "content": _asset("text/html", svg)["content"]}
        _error(
            await c.put(f"/v1/objects/{oid}", json=put, headers=h), 415, "unsupported_media_type"
        )
        assert (await c.get(f"/v1/objects/{oid}", headers=h)).json()["version"] == 1


async def test_blobs_never_sniff_run_or_render_as_the_page(app: FastAPI, token: str) -> None:
    h = {"Authorization": f"Bearer {token}"}
    async with client(app) as c:
        pdf = await c.post("/v1/objects", json=_asset("application/pdf", b"%PDF-1.4"), headers=h)
        png = await c.post("/v1/objects", json=_asset("image/png"), headers=h)
        # Stored past the api (an upstream's answer, or before the list existed).
        user_id = (await c.get("/v1/session", headers=h)).json()["user_id"]
        async with app.state.db.session() as s:
            store = make_asset_store(app.state.settings)
            html = await create_asset(s, store, user_id, "h", b"<script>", "text/html", PERSON, {})
        seen = {}
        for name, oid in (
            ("pdf", pdf.json()["object_id"]),
            ("png", png.json()["object_id"]),
            ("html", html.id),
        ):
            r = await c.get(f"/v1/objects/{oid}/blob", headers=h)
            assert r.status_code == 200, r.text
            assert r.headers["x-content-type-options"] == "nosniff"
            csp = r.headers["content-security-policy"]
            assert "sandbox" in csp and "default-src 'none'" in csp, csp
            seen[name] = (r.headers["content-type"], r.headers["content-disposition"])
    assert seen["pdf"] == ("application/pdf", "attachment")
    assert seen["png"] == ("image/png", "inline")
    assert seen["html"] == ("application/octet-stream", "attachment")


async def test_the_page_has_a_strict_csp(app: FastAPI) -> None:
    async with client(app) as c:
        for path in ("/", "/app/js/main.js", "/healthz"):
            r = await c.get(path)
            assert r.headers["x-content-type-options"] == "nosniff", path
        csp = dict(
            d.strip().split(" ", 1)
            for d in (await c.get("/")).headers["content-security-policy"].split(";")
        )
    assert csp["script-src"] == "'self'" and csp["default-src"] == "'none'", csp
    assert "unsafe" not in " ".join(csp.values()), csp
    assert csp["frame-ancestors"] == "'none'"


async def test_the_docs_load_nothing_from_another_host(app: FastAPI) -> None:
    async with client(app) as c:
        r = await c.get("/docs")
        assert r.status_code == 200
        assert not re.search(r"(https?:)?//", r.text), (
            r.text
        )  # no absolute or protocol-relative URL
        for src in re.findall(r'(?:src|href)="([^"]+)"', r.text):
            assert (await c.get(src)).status_code == 200, src
        inline = re.findall(r"<script>(.*?)</script>", r.text, re.S)
        assert len(inline) == 1 and "'sha256-" in r.headers["content-security-policy"]
        assert (await c.get("/openapi.json")).status_code == 200
        assert (await c.get("/redoc")).status_code == 404


async def test_bodies_over_256_kib_are_413_except_uploads(app: FastAPI, token: str) -> None:
    h = {"Authorization": f"Bearer {token}"}
    async with client(app) as c:
        r = await c.post("/v1/messages", json={"text": "m" * 300 * KIB}, headers=h)
        assert _error(r, 413, "too_large")["limit_bytes"] == 256 * KIB
        doc = {"type": "document", "name": "d", "content": {"text": "x" * 300 * KIB}}
        r = await c.patch("/v1/objects/obj_x", json=doc, headers=h)
        _error(r, 413, "too_large")
        r = await c.post(
            "/v1/objects", json=_asset("image/png", b"\x89PNG" + b"p" * 300 * KIB), headers=h
        )
        assert r.status_code == 201, r.text


async def _raw(
    app: FastAPI, method: str, path: str, headers: list[tuple[bytes, bytes]]
) -> tuple[int, int]:
    """Status of one request whose 1 MiB body is offered but counted: (status, bytes read)."""
    read = 0
    status = 0

    async def receive() -> Message:
        nonlocal read
        read += 64 * KIB
        return {"type": "http.request", "body": b" " * 64 * KIB, "more_body": read < 1024 * KIB}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "client": ("203.0.113.9", 1),
        "server": ("lomo", 80),
        "headers": [
            (b"host", b"localhost"),
            (b"content-length", str(1024 * KIB).encode()),
            *headers,
        ],
    }
    await app(scope, receive, send)
    return status, read


async def test_a_strangers_body_is_refused_unread(app: FastAPI, token: str) -> None:
    """401 before a byte of the body is read: no token, or a token no one has."""
    bad = [(b"authorization", b"Bearer lomo_nobody")]
    assert await _raw(app, "POST", "/v1/objects", []) == (401, 0)
    assert await _raw(app, "POST", "/v1/objects", bad) == (401, 0)
    assert await _raw(app, "PUT", "/v1/objects/obj_1", bad) == (401, 0)
    assert await _raw(app, "POST", "/v1/messages", []) == (401, 0)
    good = [(b"authorization", f"Bearer {token}".encode())]
    status, read = await _raw(app, "POST", "/v1/objects", good)
    assert read == 1024 * KIB and status == 422  # the real owner's body is read (and is junk)


async def test_repeated_401s_from_one_address_are_429(app: FastAPI, token: str) -> None:
    bad = {"Authorization": "Bearer lomo_guess"}
    async with client(app) as c, client(app, "198.51.100.1") as other:
        r = await _spend_the_address(c, bad)
        assert int(_error(r, 429, "rate_limited")["retry_after_seconds"]) >= 1
        assert int(r.headers["retry-after"]) >= 1
        _error(await c.get("/v1/tasks"), 429, "rate_limited")  # no token: the same address
        assert (await c.get("/healthz")).status_code == 200  # the page and probes still load
        r = await other.get("/v1/tasks", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        _error(await _spend_the_address(other, {}), 429, "rate_limited")


async def _spend_the_address(c: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    """The burst of 401s, then the first answer that is not one. On a loaded machine the
    burst may take seconds: what refilled meanwhile (one each 2 s) passes too, no more."""
    started = time.monotonic()
    for _ in range(ADDRESS_BURST):
        _error(await c.get("/v1/tasks", headers=headers), 401, "unauthorized")
    for _ in range(math.ceil((time.monotonic() - started) * ADDRESS_PER_MINUTE / 60) + 1):
        r = await c.get("/v1/tasks", headers=headers)
        if r.status_code != 401:
            break
    return r


def test_the_docs_render_in_chromium_from_this_host_alone(tmp_path: Path) -> None:
    """Under its CSP, with only this host's files: the operations are listed, no error."""
    chromium = require_browser()
    url = f"sqlite+aiosqlite:///{tmp_path / 'lomo.db'}"
    app = create_app(Settings(data_dir=tmp_path, database_url=url, model_provider="offline"))
    hosts: set[str] = set()
    with ThreadServer(app) as srv, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            watch = PageWatch(page, "docs")
            page.on("request", lambda r: hosts.add(urlsplit(r.url).netloc))
            page.goto(f"{srv.url}/docs")
            expect(page.locator(".opblock").first).to_be_visible(timeout=30_000)
            watch.assert_clean()
        finally:
            browser.close()
    assert hosts == {urlsplit(srv.url).netloc}, hosts

"""The body limit in front of the api: a declared length over it and a chunked body that
grows past it are both refused with 413 and the documented error body, and the app never
sees the oversized request; a body under the limit passes through whole."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from fastapi import FastAPI, Request

from api.limits import BodyLimit

LIMIT = 1000


def _app() -> tuple[FastAPI, list[int]]:
    app = FastAPI()
    seen: list[int] = []

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        body = await request.body()
        seen.append(len(body))
        return {"bytes": len(body)}

    app.add_middleware(BodyLimit, limit=LIMIT)
    return app, seen


async def _chunks(n: int) -> AsyncIterator[bytes]:
    for _ in range(n):
        yield b"x" * 300


async def test_bodies_over_the_limit_are_refused_before_the_app_reads_them() -> None:
    app, seen = _app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        ok = await c.post("/echo", content=b"x" * LIMIT)
        assert ok.status_code == 200 and ok.json() == {"bytes": LIMIT}
        declared = await c.post("/echo", content=b"x" * (LIMIT + 1))
        assert declared.status_code == 413 and declared.json()["error"] == "too_large"
        chunked = await c.post("/echo", content=_chunks(5))  # no Content-Length
        assert chunked.status_code == 413 and chunked.json()["limit_bytes"] == LIMIT
        small = await c.post("/echo", content=_chunks(3))
        assert small.status_code == 200 and small.json() == {"bytes": 900}
    assert seen == [LIMIT, 900]

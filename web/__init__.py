"""The creative app: one static ES-module page served by the api process itself (no build
step). It talks only to the public `/v1` API and its event stream, with the person's
token in the `Authorization` header (never in a URL the server logs); see web/static/.

Libraries the page uses come from npm at install time (web/package.json, `make web-vendor`)
and are served by this process under /static/vendor/, never from a CDN (see web/vendor.py).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from web import vendor

STATIC = Path(__file__).parent / "static"


def mount(app: FastAPI) -> None:
    """`/` is the page; `/app/...` its modules and styles; `/static/vendor/...` libraries."""
    app.mount("/app", StaticFiles(directory=STATIC), name="app")
    vendor.mount(app)

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        # no-cache: a restarted api with a new version of the page is picked up at once.
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

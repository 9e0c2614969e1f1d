"""Headers that keep a browser from doing more than the page means: a strict Content
Security Policy on the app's page, `nosniff` on every response, and the API docs (Swagger
UI) served from this process instead of a CDN, so the page never runs a third party's code.

ReDoc is off: no package on PyPI ships its bundle, and Swagger UI covers the same schema."""

from __future__ import annotations

import base64
import hashlib
import re
from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Swagger UI's built files, as the swagger-ui-py package ships them (its Python is unused).
SWAGGER_DIST = Path(str(files("swagger_ui") / "static"))

# The page is one module script and one stylesheet of its own; assets it shows are fetched
# with the token and shown through blob: URLs; the favicon is an empty data: URL.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "media-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
DOCS_ASSETS = "/docs/assets"
_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


class SecurityHeaders:
    """`nosniff` on every response; the page's CSP on `/` and what it loads, unless the
    route set its own (the docs page, asset bytes)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                if b"x-content-type-options" not in names:
                    headers.append((b"x-content-type-options", b"nosniff"))
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", PAGE_CSP.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def mount_docs(app: FastAPI) -> None:
    """Swagger UI at /docs with its script and styles from the swagger-ui-py package.
    Create the app with `docs_url=None, redoc_url=None` so FastAPI's CDN page is not there."""
    app.mount(DOCS_ASSETS, StaticFiles(directory=SWAGGER_DIST), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} - API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
        )
        html = bytes(page.body).decode()
        # The page's one inline script (the UI's settings) is allowed by its hash alone.
        hashes = " ".join(
            f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
            for s in _SCRIPT.findall(html)
        )
        csp = (
            f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'"
        )
        return HTMLResponse(html, headers={"Content-Security-Policy": csp})

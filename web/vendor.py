"""three.js for the page's 3D previews, served from web/node_modules (installed by
`make web-vendor` from web/package-lock.json) under /static/vendor/three/.

three's add-ons (the glTF loader) import the bare specifier 'three', which a browser
resolves only through an import map; an inline import map would need the page's CSP to
allow an inline script. So the few modules the page loads are served with that one
specifier replaced by the served path of three's own module, and the CSP stays
`script-src 'self'`. Only the listed files are served."""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import Response

THREE = Path(__file__).parent / "node_modules" / "three"
PREFIX = "/static/vendor/three"
# What the page imports, and what those import in turn (relative imports stay as they are).
FILES = frozenset(
    {
        "build/three.module.js",
        "build/three.core.js",
        "examples/jsm/loaders/GLTFLoader.js",
        "examples/jsm/utils/BufferGeometryUtils.js",
        "examples/jsm/utils/SkeletonUtils.js",
    }
)
_BARE = re.compile(r"""(\bfrom\s*|\bimport\s*)(['"])three\2""")
JS = "text/javascript; charset=utf-8"


@cache
def _module(path: str) -> tuple[bytes, str]:
    """The file as served, and its ETag."""
    text = (THREE / path).read_text(encoding="utf-8")
    body = _BARE.sub(rf"\1\2{PREFIX}/build/three.module.js\2", text).encode()
    return body, f'"{hashlib.sha256(body).hexdigest()[:32]}"'


def mount(app: FastAPI) -> None:
    """A sub-app of its own: not part of the api's routes or schema, the app's middleware
    (CSP, nosniff, host check) still around it."""
    files = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.mount(PREFIX, files, name="vendor-three")

    @files.get("/{path:path}")
    async def three(path: str, request: Request) -> Response:
        if path not in FILES:
            raise HTTPException(404, "not a vendored file")
        if not (THREE / path).is_file():
            # The api runs, the library is missing: `make web-vendor` was not run.
            raise HTTPException(503, "three.js is not installed (make web-vendor)")
        body, etag = _module(path)
        # Revalidated each time: a new lock's files are picked up at once, unchanged ones
        # cost a 304.
        headers = {"Cache-Control": "no-cache", "ETag": etag}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        return Response(body, media_type=JS, headers=headers)

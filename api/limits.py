"""Request bodies in front of the api (README "Limits and forgery").

The body is read here, whole, before the app sees the request: one over the limit is
refused with 413 and the documented error body (a declared Content-Length over it without
reading a byte), so an oversized upload stores nothing. The largest body the api takes is
an asset upload: its bytes as base64 (4/3) plus the JSON around them. The app would read
the whole body anyway (every body is JSON), so holding it here costs no extra memory.

A NUL character anywhere in the path, the query or a JSON string of the body is refused
with 400: Postgres cannot store one in text (a 500 deep inside otherwise), and no person
means one. Both checks run before the app acts, so nothing is half done.

Every route takes at most DEFAULT_BODY (256 KiB, far above any JSON it expects); only the
routes that take an asset's bytes (UPLOAD_ROUTES) take up to the upload limit. Under /v1 a
body is read only after the caller showed a bearer token: a request with a body and none is
refused with 401 unread, and on an upload route the token is looked up first, so a stranger
cannot make the api hold an upload-sized body in memory."""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lomo.auth import principal_for_token
from lomo.db.engine import Database
from lomo.errors import Unauthorized
from lomo.problem import PROBLEM_JSON, problem_bytes

ENVELOPE = 64 * 1024
DEFAULT_BODY = 256 * 1024
# Create an object (an asset with its bytes) and write a new version (an asset's new bytes).
UPLOAD_ROUTES = (
    (b"POST", re.compile(r"/v1/objects/?")),
    (b"PUT", re.compile(r"/v1/objects/[^/]+/?")),
)
# Under /v1 without a bearer token: the upstreams' callbacks (signed instead) and the
# sign-in page's check of a pasted token (the token is the body).
CALLBACKS = "/v1/generation/callbacks"
PAYMENT_WEBHOOKS = "/v1/payments/webhooks"
SIGNED = frozenset({CALLBACKS, PAYMENT_WEBHOOKS})
UNBEARERED = SIGNED | {"/v1/session/check"}
# "\u0000" after an even run of backslashes (an odd run makes it literal text).
NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
NUL_DETAIL = "the request contains a NUL character (\\u0000), which cannot be stored"


def body_limit(max_upload_bytes: int) -> int:
    return max_upload_bytes * 4 // 3 + ENVELOPE


class BodyLimit:
    """`limit` for every route; `upload_limit` (default: `limit`) for UPLOAD_ROUTES."""

    def __init__(self, app: ASGIApp, limit: int, upload_limit: int | None = None) -> None:
        self.app, self.limit = app, limit
        self.upload_limit = limit if upload_limit is None else upload_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        upload = _is_upload(scope)
        limit = self.upload_limit if upload else self.limit
        # Who, before how much: a stranger learns nothing about the limits.
        if _has_body(headers) and (refused := await _refused_bearer(scope, headers, upload)):
            await send_error(send, 401, "unauthorized", refused, AUTH_HEADERS)
            return
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _too_large(send, int(length), limit)
            return
        if _has_nul_in_url(scope):
            await send_error(send, 400, "invalid_input", NUL_DETAIL, [])
            return
        await self._read_then_call(scope, receive, send, limit)

    async def _read_then_call(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        chunks, seen = [], 0
        while True:  # chunked bodies have no length up front: count as they arrive
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before its body was complete
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > limit:
                await _too_large(send, seen, limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if b"\x00" in body or NUL_ESCAPE.search(body):
            await send_error(send, 400, "invalid_input", NUL_DETAIL, [(b"connection", b"close")])
            return
        await self.app(scope, _replay(body, receive), send)


AUTH_HEADERS = [(b"www-authenticate", b"Bearer"), (b"connection", b"close")]


def _is_upload(scope: Scope) -> bool:
    method = scope["method"].encode()
    return any(m == method and p.fullmatch(scope["path"]) for m, p in UPLOAD_ROUTES)


def _has_body(headers: dict[bytes, bytes]) -> bool:
    return headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers


async def _refused_bearer(scope: Scope, headers: dict[bytes, bytes], upload: bool) -> str | None:
    """Why the caller may not send this body, or None. Only /v1 asks for a token; the
    dependency checks it again for every request (this is only the early refusal)."""
    path: str = scope["path"]
    if not path.startswith("/v1/") or path in UNBEARERED:
        return None
    auth = headers.get(b"authorization", b"")
    if not auth.lower().startswith(b"bearer ") or not auth[7:].strip():
        return "missing bearer token"
    if not upload:
        return None  # a body of at most DEFAULT_BODY: cheaper to read than a DB lookup
    db: Database = scope["app"].state.db
    try:
        async with db.session() as s:
            await principal_for_token(s, auth[7:].strip().decode("latin-1"))
    except Unauthorized:
        return "unknown or revoked token"
    return None


def _has_nul_in_url(scope: Scope) -> bool:
    query: bytes = scope.get("query_string", b"").lower()
    return "\x00" in scope["path"] or b"%00" in query or b"\x00" in query


def _replay(body: bytes, receive: Receive) -> Receive:
    """The whole body as one message, then the real channel (disconnects)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _too_large(send: Send, size: int, limit: int) -> None:
    detail = f"the request body is {size / 1e6:.1f} MB; the limit is {limit / 1e6:.1f} MB"
    await send_error(send, 413, "too_large", detail, [(b"connection", b"close")], limit_bytes=limit)


async def send_error(
    send: Send,
    status: int,
    code: str,
    detail: str,
    headers: list[tuple[bytes, bytes]],
    **extra: object,
) -> None:
    """The api's error body (docs/api.md, "Errors") from below the app."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", PROBLEM_JSON.encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": problem_bytes(status, code, detail, **extra)})

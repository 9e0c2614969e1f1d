"""Request bodies in front of the api (README "Limits and forgery").

The body is read here, whole, before the app sees the request: one over the limit is
refused with 413 and the documented error body (a declared Content-Length over it without
reading a byte), so an oversized upload stores nothing. The largest body the api takes is
an asset upload: its bytes as base64 (4/3) plus the JSON around them. The app would read
the whole body anyway (every body is JSON), so holding it here costs no extra memory.

A NUL character anywhere in the path, the query or a JSON string of the body is refused
with 400: Postgres cannot store one in text (a 500 deep inside otherwise), and no person
means one. Both checks run before the app acts, so nothing is half done."""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

ENVELOPE = 64 * 1024
# "\u0000" after an even run of backslashes (an odd run makes it literal text).
NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
NUL_BODY: dict[str, object] = {
    "error": "invalid_input",
    "detail": "the request contains a NUL character (\\u0000), which cannot be stored",
}


def body_limit(max_upload_bytes: int) -> int:
    return max_upload_bytes * 4 // 3 + ENVELOPE


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await _too_large(send, int(length), self.limit)
            return
        if _has_nul_in_url(scope):
            await send_error(send, 400, NUL_BODY, [])
            return
        chunks, seen = [], 0
        while True:  # chunked bodies have no length up front: count as they arrive
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before its body was complete
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.limit:
                await _too_large(send, seen, self.limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if b"\x00" in body or NUL_ESCAPE.search(body):
            await send_error(send, 400, NUL_BODY, [(b"connection", b"close")])
            return
        await self.app(scope, _replay(body, receive), send)


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
    body = {"error": "too_large", "detail": detail, "limit_bytes": limit}
    await send_error(send, 413, body, [(b"connection", b"close")])


async def send_error(
    send: Send, status: int, body: dict[str, object], headers: list[tuple[bytes, bytes]]
) -> None:
    """The api's error body (API.md) from below the app."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})

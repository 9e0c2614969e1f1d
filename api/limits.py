"""A request body over the limit is refused before it is read (413 with the error body),
so an oversized upload costs no memory and stores nothing. The largest body the api takes
is an asset upload: its bytes as base64 (4/3) plus the JSON around them."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

ENVELOPE = 64 * 1024


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
            await _refuse(send, int(length), self.limit)
            return
        seen = 0

        async def counted() -> dict[str, object]:
            # Chunked bodies have no length up front: count as they arrive.
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLong()
            return dict(message)

        try:
            await self.app(scope, counted, send)
        except _TooLong:
            await _refuse(send, seen, self.limit)


class _TooLong(Exception):
    pass


async def _refuse(send: Send, size: int, limit: int) -> None:
    body = json.dumps(
        {
            "error": "too_large",
            "detail": f"the request body is {size / 1e6:.1f} MB; the limit is {limit / 1e6:.1f} MB",
            "limit_bytes": limit,
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"connection", b"close")],
        }
    )
    await send({"type": "http.response.body", "body": body})

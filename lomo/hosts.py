"""Host header check for the api and the simulator: a page on another site that rebinds its
DNS name to this machine still sends its own name, and is refused with 400."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from lomo.problem import PROBLEM_JSON, problem_bytes


def host_name(header: str) -> str:
    """The name in a Host header without its port: `[::1]:8000` → `::1`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    if header.count(":") > 1:  # a bare IPv6 address, no port possible
        return header
    return header.split(":", 1)[0]


class TrustedHosts:
    """Pure ASGI (no body buffering): answers 400 to a request whose Host is not allowed.
    `*` among the names allows any host (an operator's explicit choice)."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(h.lower() for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or "*" in self.allowed:
            await self.app(scope, receive, send)
            return
        raw = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if host_name(raw) in self.allowed:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = problem_bytes(400, "invalid_host", "Host header not allowed")
        headers = [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})

"""Rate per bearer token and open event streams per person (README "Limits and forgery").

Both are counted in this process: no shared store sits on every request's path, and each
replica protects its own event loop and connection pool, which is what they are for. Behind
a balancer with N replicas a token may get up to N times the configured rate, and a person
N times the streams; the settings are per replica (divide by N, or route by token to make
them exact). A DB-backed counter would be exact across replicas but costs a write on every
request, on the same database the requests are protecting."""

from __future__ import annotations

import hashlib
import math
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.limits import SIGNED, send_error

# Per client address, for requests that prove no one: /v1 without a bearer token, and any
# 401. A person mistypes a token a few times; a guesser needs millions. The address is the
# peer's (a proxy in front makes it the proxy's: deploy behind one that limits too).
ADDRESS_PER_MINUTE = 30
ADDRESS_BURST = 30


class TokenBuckets:
    """`burst` requests at once, then `per_minute` evenly, per key."""

    MAX_KEYS = 100_000  # past this, full buckets are dropped (they equal a fresh one)

    def __init__(self, per_minute: int, burst: int) -> None:
        self.rate, self.burst = per_minute / 60.0, float(max(burst, 1))
        self.buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def take(self, key: str, now: float | None = None) -> float:
        """0 when the request may pass, else the seconds until it could."""
        now = time.monotonic() if now is None else now
        tokens, at = self.buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens >= 1:
            self.buckets[key] = (tokens - 1, now)
            self._prune(now)
            return 0.0
        self.buckets[key] = (tokens, now)
        return (1 - tokens) / self.rate

    def wait(self, key: str, now: float | None = None) -> float:
        """What `take` would answer, without spending anything."""
        now = time.monotonic() if now is None else now
        tokens, at = self.buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def _prune(self, now: float) -> None:
        if len(self.buckets) > self.MAX_KEYS:
            full = self.burst / self.rate
            self.buckets = {k: v for k, v in self.buckets.items() if now - v[1] < full}


class RateLimit:
    """429 `rate_limited` with Retry-After once a bearer token has spent its bucket, or its
    client address has spent the address bucket (unauthenticated /v1 requests and 401s).
    Other requests without a bearer token (health, the web page, signed callbacks) pass."""

    def __init__(self, app: ASGIApp, per_minute: int, burst: int) -> None:
        self.app, self.buckets = app, TokenBuckets(per_minute, burst)
        self.addresses = TokenBuckets(ADDRESS_PER_MINUTE, ADDRESS_BURST)
        self.on = per_minute > 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.on:
            await self.app(scope, receive, send)
            return
        auth = dict(scope.get("headers", [])).get(b"authorization", b"")
        bearer = auth.lower().startswith(b"bearer ")
        path: str = scope["path"]
        address = f"addr:{(scope.get('client') or ('?',))[0]}"
        if path.startswith("/v1/"):
            wait = self.addresses.wait(address)
            if wait > 0:
                await _refuse(send, wait, "from this address without a valid token")
                return
        # Keyed by a digest: the table never holds a usable token.
        if bearer and (wait := self.buckets.take(hashlib.sha256(auth[7:].strip()).hexdigest())):
            await _refuse(send, wait, "with this token")
            return
        charged = path.startswith("/v1/") and not bearer and path not in SIGNED
        if charged:
            self.addresses.take(address)

        async def count_401(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                if not charged:
                    self.addresses.take(address)
            await send(message)

        await self.app(scope, receive, count_401)


async def _refuse(send: Send, wait: float, why: str) -> None:
    retry = max(1, math.ceil(wait))
    body = {
        "error": "rate_limited",
        "detail": f"too many requests {why}; retry in {retry} s",
        "retry_after_seconds": retry,
    }
    await send_error(send, 429, body, [(b"retry-after", str(retry).encode())])


class StreamSlots:
    """Open event streams per person in this process (per replica, like the rate)."""

    def __init__(self, per_person: int) -> None:
        self.per_person = per_person
        self.open: dict[str, int] = {}

    def acquire(self, person: str) -> bool:
        if self.open.get(person, 0) >= self.per_person:
            return False
        self.open[person] = self.open.get(person, 0) + 1
        return True

    def release(self, person: str) -> None:
        left = self.open.get(person, 0) - 1
        if left > 0:
            self.open[person] = left
        else:
            self.open.pop(person, None)

"""Rate per bearer token, failed tokens per client address, and open event streams per
person (docs/api.md#limits).

The rate per token is counted in this process: no shared store sits on every request's
path, and each replica protects its own event loop and connection pool, which is what it is
for. Behind a balancer with N replicas a token may get up to N times the configured rate,
and a person N times the streams (divide the settings by N, or route by token).

The address limit guards against guessing tokens, which must not scale with the replicas:
it is counted in the database (`api/rate_store.py`), shared by every replica. Only requests
that prove no one reach that store: those without a bearer token, and those whose token this
process has not accepted in the last `KNOWN_FOR_S`; a person's ordinary requests never do.
Each process also keeps its own count, which decides alone while the store cannot answer.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.limits import SIGNED, send_error
from api.rate_store import SharedBuckets

log = logging.getLogger(__name__)

# Per client address, for requests that prove no one: /v1 without a bearer token, and any
# 401. A person mistypes a token a few times; a guesser needs millions. The address is the
# peer's (a proxy in front makes it the proxy's: deploy behind one that limits too).
ADDRESS_PER_MINUTE = 30
ADDRESS_BURST = 30
# A token this process accepted skips the address check for this long (it proves someone).
KNOWN_FOR_S = 60.0
STORE_WARN_EVERY_S = 60.0  # one log line a minute while the shared store fails


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


class KnownTokens:
    """Digests of tokens this process accepted lately (a 401 forgets one at once)."""

    MAX = 100_000

    def __init__(self) -> None:
        self.until: dict[str, float] = {}

    def __contains__(self, digest: str) -> bool:
        return self.until.get(digest, 0.0) > time.monotonic()

    def add(self, digest: str) -> None:
        if len(self.until) >= self.MAX:
            now = time.monotonic()
            self.until = {k: t for k, t in self.until.items() if t > now}
        self.until[digest] = time.monotonic() + KNOWN_FOR_S

    def discard(self, digest: str) -> None:
        self.until.pop(digest, None)


class RateLimit:
    """429 `rate_limited` with Retry-After once a bearer token has spent its bucket, or its
    client address has spent the address bucket (unauthenticated /v1 requests and 401s).
    Other requests without a bearer token (health, the web page, signed callbacks) pass,
    and so do requests with a token this process accepted lately."""

    def __init__(
        self, app: ASGIApp, per_minute: int, burst: int, shared: SharedBuckets | None = None
    ) -> None:
        self.app, self.buckets = app, TokenBuckets(per_minute, burst)
        self.addresses = TokenBuckets(ADDRESS_PER_MINUTE, ADDRESS_BURST)
        self.shared, self.known = shared, KnownTokens()
        self.warned = -STORE_WARN_EVERY_S
        self.on = per_minute > 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.on:
            await self.app(scope, receive, send)
            return
        auth = dict(scope.get("headers", [])).get(b"authorization", b"")
        bearer = auth.lower().startswith(b"bearer ")
        # Keyed by a digest: no table holds a usable token.
        digest = hashlib.sha256(auth[7:].strip()).hexdigest() if bearer else ""
        path: str = scope["path"]
        address = f"addr:{(scope.get('client') or ('?',))[0]}"
        charged = path.startswith("/v1/") and not bearer and path not in SIGNED
        if path.startswith("/v1/") and digest not in self.known:
            wait = self.addresses.wait(address)
            if not wait:
                wait = await self._shared(address, spend=charged)
            if wait > 0:
                await _refuse(send, wait, "from this address without a valid token")
                return
        if bearer and (wait := self.buckets.take(digest)):
            await _refuse(send, wait, "with this token")
            return
        if charged:
            self.addresses.take(address)

        async def count_401(message: Message) -> None:
            if message["type"] == "http.response.start":
                if message["status"] == 401:
                    self.known.discard(digest)
                    if not charged:  # a charged request was counted on its way in
                        self.addresses.take(address)
                        await self._shared(address, spend=True)
                elif bearer:
                    self.known.add(digest)
            await send(message)

        await self.app(scope, receive, count_401)

    async def _shared(self, address: str, spend: bool) -> float:
        """The address's shared bucket: taken from when `spend`, else only read. 0 where
        there is no store or it failed (this process's own count stands)."""
        if self.shared is None:
            return 0.0
        try:
            if spend:
                return await self.shared.take(address)
            return await self.shared.wait(address)
        except Exception as e:  # the store is down: the limit is this process's alone
            if time.monotonic() - self.warned > STORE_WARN_EVERY_S:
                self.warned = time.monotonic()
                log.warning("rate limit: shared buckets unavailable (%s); counting here", e)
            return 0.0


async def _refuse(send: Send, wait: float, why: str) -> None:
    retry = max(1, math.ceil(wait))
    detail = f"too many requests {why}; retry in {retry} s"
    headers = [(b"retry-after", str(retry).encode())]
    await send_error(send, 429, "rate_limited", detail, headers, retry_after_seconds=retry)


class StreamSlots:
    """Open event streams per person in this process (per replica, like the token rate)."""

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

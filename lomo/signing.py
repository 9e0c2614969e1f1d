"""The generation-callback signature, shared by the upstream (simulator) and the api.

`X-Lomo-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + raw body>`. The
timestamp is inside the MAC, so an old callback cannot be replayed with a fresh time; the
api refuses a signature whose time is further than its freshness window from its own clock
(either way, to allow for clock skew). Within the window a replay is a duplicate report,
which the order state machine ignores (docs/api.md#generation-callbacks)."""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "X-Lomo-Signature"


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, at: float | None = None) -> str:
    """The header value for `body`, signed now (or at `at`, unix seconds)."""
    timestamp = int(time.time() if at is None else at)
    return f"t={timestamp},v1={_mac(secret, timestamp, body)}"


def refusal(
    secret: str, body: bytes, header: str | None, max_age_seconds: float, now: float | None = None
) -> str | None:
    """Why the signature is refused, or None when it is valid and fresh."""
    if not header:
        return "missing X-Lomo-Signature"
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    stamp, mac = parts.get("t", ""), parts.get("v1", "")
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12) or not mac:
        return "X-Lomo-Signature needs t=<unix seconds>,v1=<hex HMAC>"
    # Bytes: compare_digest refuses non-ASCII str, and a header may carry any latin-1.
    if not hmac.compare_digest(mac.encode(), _mac(secret, int(stamp), body).encode()):
        return "bad X-Lomo-Signature"
    age = (time.time() if now is None else now) - int(stamp)
    if abs(age) > max_age_seconds:
        return f"X-Lomo-Signature is {age:.0f} s old; the window is {max_age_seconds:.0f} s"
    return None

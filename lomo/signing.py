"""The generation-callback signature, shared by the upstream (simulator) and the api."""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Lomo-Signature"


def sign(secret: str, body: bytes) -> str:
    """Hex HMAC-SHA256 of the raw body."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, signature: str | None) -> bool:
    return bool(signature) and hmac.compare_digest(signature or "", sign(secret, body))

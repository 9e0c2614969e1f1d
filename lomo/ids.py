"""Opaque, sortable ids for rows created outside workflows.

Workflow code must not call these (they use os.urandom and the wall clock); workflows
derive ids from `workflow.uuid4()` or from the business keys they already hold.
"""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def _b32(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        value, rem = divmod(value, 32)
        out.append(_ALPHABET[rem])
    return "".join(reversed(out))


def new_id(prefix: str) -> str:
    """`prefix_` + 10 chars of millisecond time + 12 random chars: sortable by creation."""
    ms = int(time.time() * 1000)
    rnd = int.from_bytes(os.urandom(8), "big")
    return f"{prefix}_{_b32(ms, 10)}{_b32(rnd, 12)}"


def call_id(task_id: str, turn: int, step: int, index: int) -> str:
    """The business idempotency key of one tool call (docs/architecture.md#the-agent-step)."""
    return f"{task_id}:{turn}:{step}:{index}"

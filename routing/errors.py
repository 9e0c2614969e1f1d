"""Why a routing request can never succeed (retrying would not help)."""

from __future__ import annotations


class Unroutable(Exception):
    """`kind` names the reason for the caller (the activity's error type)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

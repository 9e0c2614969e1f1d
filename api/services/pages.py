"""The list endpoints' page cursor: opaque to clients (base64url of the last row's key), so
the key's form may change without breaking them. See docs/api.md, "Lists"."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from lomo.db.pages import Page, cut
from lomo.errors import InvalidCursor

T = TypeVar("T")
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
_KEY = re.compile(r"[A-Za-z0-9_.:-]{1,80}")


def encode(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def decode(cursor: str) -> str:
    try:
        key = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError) as e:
        raise InvalidCursor("the cursor is not one this api gave out") from e
    if not _KEY.fullmatch(key):
        raise InvalidCursor("the cursor is not one this api gave out")
    return key


def page_of(cursor: str | None, limit: int) -> Page:
    return Page(limit=limit, after=decode(cursor) if cursor is not None else None)


def finish(rows: Sequence[T], page: Page, key: Callable[[T], str]) -> tuple[list[T], str | None]:
    """The page's rows and the cursor of the next page (None on the last)."""
    shown, more = cut(rows, page)
    return shown, encode(key(shown[-1])) if more and shown else None

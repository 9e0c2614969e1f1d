"""Keyset pages over a list the api shows: a stable order (creation time, then id; or a
version number) and the next page starting after the last row shown, so rows added between
two requests neither repeat nor push others out of sight.

A list asks for `limit + 1` rows: the extra one only says whether a next page exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Select, and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from lomo.errors import InvalidCursor

T = TypeVar("T")
# Any SELECT, whatever its columns: the page only adds order, limit and a condition.
Q = TypeVar("Q", bound="Select[*tuple[Any, ...]]")


@dataclass(frozen=True, slots=True)
class Page:
    """At most `limit` rows, after the row whose key is `after` (None: from the start)."""

    limit: int
    after: str | None = None


async def by_creation(
    s: AsyncSession,
    q: Q,
    created: InstrumentedAttribute[datetime],
    ident: InstrumentedAttribute[str],
    page: Page,
    *,
    descending: bool,
    scope: Sequence[ColumnElement[bool]],
) -> Q:
    """`q` ordered by (created, id) and limited to the page. The key is the id of the last
    row shown; it must be a row of this list (`scope`: the owner's), else InvalidCursor, so
    another person's id answers like a made-up one."""
    order = (created.desc(), ident.desc()) if descending else (created.asc(), ident.asc())
    q = q.order_by(*order).limit(page.limit + 1)
    if page.after is None:
        return q
    if await s.scalar(select(ident).where(ident == page.after, *scope)) is None:
        raise InvalidCursor("the cursor names no row of this list; start again without it")
    pivot = select(created).where(ident == page.after).scalar_subquery()
    if descending:
        later = or_(created < pivot, and_(created == pivot, ident < page.after))
    else:
        later = or_(created > pivot, and_(created == pivot, ident > page.after))
    return q.where(later)


def by_number(q: Q, number: InstrumentedAttribute[int], page: Page) -> Q:
    """`q` ordered by an integer key (a version), limited to the page after `page.after`."""
    q = q.order_by(number).limit(page.limit + 1)
    if page.after is None:
        return q
    if not page.after.isdigit() or len(page.after) > 10:
        raise InvalidCursor("the cursor is not a position in this list")
    return q.where(number > int(page.after))


def cut(rows: Sequence[T], page: Page) -> tuple[list[T], bool]:
    """The rows of the page, and whether more follow (the query asked for one extra)."""
    return list(rows[: page.limit]), len(rows) > page.limit

"""A statement with its values, and list membership bound as one parameter.

Rooms that own tables (memory, workspace, the event log) hand the agent step's storage
(`journal/`) their reads and writes as `Query` values; the storage decides how to run them
(one after another on SQLite, several in one round trip on Postgres). `in_list` keeps a
statement's text fixed whatever the list's length, so it is compiled once: on Postgres it
is `col = ANY(%(ids)s)` with an array, elsewhere `col IN (SELECT value FROM json_each(?))`
with the list as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, TypeDecorator, bindparam
from sqlalchemy.engine import CursorResult, Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import QueryableAttribute
from sqlalchemy.sql import Executable
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.types import NullType

Rows = list[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Query:
    """One statement and the values of its named parameters."""

    stmt: Executable
    params: dict[str, Any] = field(default_factory=dict)


async def run(conn: AsyncSession | AsyncConnection, q: Query) -> Rows:
    """The rows of `q` (a write's RETURNING rows; none without) through SQLAlchemy. Through
    a session on its connection, after flushing its pending changes: a Core statement, not
    an ORM bulk operation."""
    if isinstance(conn, AsyncSession):
        if conn.new or conn.dirty or conn.deleted:
            await conn.flush()
        conn = await conn.connection()
    result = await conn.execute(q.stmt, q.params)
    if isinstance(result, CursorResult) and not result.returns_rows:
        return []
    return [tuple(r) for r in result]


class _ListParam(TypeDecorator[list[Any]]):
    """A list bound as one value: an array on Postgres, a JSON text elsewhere."""

    impl = NullType
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        items = list(value or ())
        return items if dialect.name == "postgresql" else json.dumps(items)


class InList(ColumnElement[bool]):
    """`column` is one of the values bound to the parameter `name`."""

    # Not cached by SQLAlchemy (its key would not tell two columns apart); the Postgres
    # backend compiles its statements once itself.
    inherit_cache = False
    type = NullType()  # type: ignore[assignment]

    def __init__(self, column: ColumnElement[Any] | QueryableAttribute[Any], name: str) -> None:
        self.column = column.expression if isinstance(column, QueryableAttribute) else column
        self.param = bindparam(name, type_=_ListParam())

    def get_children(self, **kw: Any) -> list[ColumnElement[Any]]:
        return [self.column, self.param]


def in_list(column: ColumnElement[Any] | QueryableAttribute[Any], name: str) -> InList:
    return InList(column, name)


@compiles(InList)
def _in_json(element: InList, compiler: SQLCompiler, **kw: Any) -> str:
    col, param = compiler.process(element.column, **kw), compiler.process(element.param, **kw)
    return f"{col} IN (SELECT value FROM json_each({param}))"


@compiles(InList, "postgresql")
def _any_array(element: InList, compiler: SQLCompiler, **kw: Any) -> str:
    col, param = compiler.process(element.column, **kw), compiler.process(element.param, **kw)
    return f"{col} = ANY({param})"

"""Hot reads: a SELECT built once, compiled once, and on Postgres run on the driver.

An agent step reads about twenty small result sets. Through the async session each
statement cost 0.65–0.9 ms of CPU on the CI machine (cache key, two greenlet hops, result
and ORM bookkeeping), the psycopg connection under it 0.25 ms (issue 14). A `HotQuery` keeps
the statement as SQLAlchemy builds it, with named bind parameters, and:

- on Postgres compiles it once and sends it on the session's own connection, so it sees
  the session's transaction and its flushed changes (pending ones are flushed first, as
  the session's own execute would); an expanding `IN` becomes `= ANY(array)`, which binds
  any number of values in one parameter;
- on every other dialect (SQLite, the embedded default) runs it through the session.

Both paths return plain tuples and raise SQLAlchemy's errors (a lost connection is
invalidated, as the session does); `tests/test_hot_query.py` holds them to the same rows.
Only reads belong here: writes keep the session (its writers' queue on SQLite, its
events on commit).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.compiler import SQLCompiler

# An expanding parameter as SQLAlchemy's compiler leaves it for execution time.
_EXPANDING_IN = re.compile(r"(NOT )?IN \(__\[POSTCOMPILE_(\w+)\]\)")
Processor = Callable[[Any], Any] | None
AnySelect = Select[*tuple[Any, ...]]


class _Compiled:
    """The statement's Postgres text and what binding and reading it need."""

    def __init__(self, stmt: AnySelect, dialect: Dialect) -> None:
        compiled = stmt.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        self.compiled = compiled

        def as_any(m: re.Match[str]) -> str:
            op = "<> ALL" if m.group(1) else "= ANY"
            return f"{op}(%({m.group(2)})s)"

        self.sql = _EXPANDING_IN.sub(as_any, compiled.string)
        if "__[POSTCOMPILE" in self.sql:
            raise ValueError(f"a post-compile parameter this module cannot bind: {self.sql}")
        self.expanding = {b.key for b in compiled.binds.values() if b.expanding}
        self.bind_processors: dict[str, Callable[[Any], Any]] = {}
        for key, proc in compiled._bind_processors.items():
            if not callable(proc):  # a tuple type's per-element processors
                raise ValueError(f"a parameter this module cannot bind: {key}")
            self.bind_processors[key] = proc
        procs: list[Processor] = [
            col[3]._cached_result_processor(dialect, None) for col in compiled._result_columns
        ]
        self.result_processors: list[Processor] | None = (
            procs if any(p is not None for p in procs) else None
        )

    def params(self, given: dict[str, Any]) -> dict[str, Any]:
        params = dict(self.compiled.construct_params(given))  # a missing value raises
        for key in self.expanding:
            params[key] = list(params[key])
        for key, proc in self.bind_processors.items():
            value = params.get(key)
            if key in self.expanding:
                params[key] = [proc(v) for v in value or ()]
            elif value is not None:
                params[key] = proc(value)
        return params


class HotQuery:
    """One read, built once with `bindparam`s: `await q.rows(session, name=value, ...)`."""

    def __init__(self, stmt: AnySelect) -> None:
        self.stmt = stmt
        self._pg: _Compiled | None = None

    def sql(self, dialect: Dialect) -> str:
        """The Postgres text this query sends (for tests and EXPLAIN)."""
        return self._compiled(dialect).sql

    def _compiled(self, dialect: Dialect) -> _Compiled:
        if self._pg is None:
            self._pg = _Compiled(self.stmt, dialect)
        return self._pg

    async def rows(self, s: AsyncSession, **params: Any) -> list[tuple[Any, ...]]:
        if s.get_bind().dialect.name != "postgresql":
            return [tuple(r) for r in await s.execute(self.stmt, params)]
        if s.new or s.dirty or s.deleted:
            await s.flush()  # what the session's execute would have done first
        conn = await s.connection()
        dialect = conn.dialect
        compiled = self._compiled(dialect)
        raw = await conn.get_raw_connection()
        bound = compiled.params(params)
        try:
            cur = await raw.driver_connection.execute(compiled.sql, bound)  # type: ignore[union-attr]
            got: Sequence[tuple[Any, ...]] = await cur.fetchall()
        except dialect.loaded_dbapi.Error as e:
            # As the session's execute would: a lost connection is invalidated (the pool
            # replaces it), and the error is SQLAlchemy's, so callers catch one family.
            gone = dialect.is_disconnect(e, raw.dbapi_connection, None)
            if gone:
                await conn.invalidate(e)
            raise DBAPIError.instance(
                compiled.sql,
                bound,
                e,
                dialect.loaded_dbapi.Error,
                connection_invalidated=gone,
                dialect=dialect,
            ) from e
        procs = compiled.result_processors
        if procs is None:
            return list(got)
        return [tuple(p(v) if p else v for p, v in zip(procs, r, strict=True)) for r in got]

    async def first(self, s: AsyncSession, **params: Any) -> tuple[Any, ...] | None:
        rows = await self.rows(s, **params)
        return rows[0] if rows else None

    async def scalars(self, s: AsyncSession, **params: Any) -> list[Any]:
        return [r[0] for r in await self.rows(s, **params)]

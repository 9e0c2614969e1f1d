"""How the step's storage runs its statements: two backends behind one small interface.

A `Batch` runs a list of `Query`s in order and returns each one's rows. `reads()` gives one
for reads outside a transaction; `transaction()` one whose statements commit together
(`commit=True` on the last batch commits with it; leaving the block commits what is left,
an error rolls back).

- `SqliteBackend` runs each statement through SQLAlchemy's connection, one after another
  (SQLite has no round trips to save; its writers' queue lives on the engine).
- `PostgresBackend` compiles each statement once and sends a whole batch in one psycopg
  pipeline: one round trip, with the transaction's BEGIN and COMMIT in the same pipeline.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

from psycopg import AsyncConnection as PgConnection
from psycopg import pq
from sqlalchemy import BindParameter, Select
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import visitors
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import UpdateBase

from lomo.db.query import Query, Rows, run


class Batch(Protocol):
    async def __call__(self, *queries: Query, commit: bool = False) -> list[Rows]: ...


class Backend(Protocol):
    def reads(self) -> Any:
        """`async with backend.reads() as batch`: statements outside a transaction."""

    def transaction(self) -> Any:
        """`async with backend.transaction() as batch`: statements that commit together."""


class SqliteBackend:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @asynccontextmanager
    async def reads(self) -> AsyncIterator[Batch]:
        async with self.engine.connect() as conn:

            async def batch(*queries: Query, commit: bool = False) -> list[Rows]:
                return [await run(conn, q) for q in queries]

            yield batch

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Batch]:
        async with self.engine.connect() as conn, conn.begin():

            async def batch(*queries: Query, commit: bool = False) -> list[Rows]:
                return [await run(conn, q) for q in queries]

            yield batch


Processor = Callable[[Any], Any] | None
_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_MAX_COMPILED = 1024


class _Compiled:
    """A statement's Postgres text and the conversions of its values and rows."""

    def __init__(self, stmt: Any, dialect: Dialect) -> None:
        compiled = stmt.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        if "POSTCOMPILE" in compiled.string:
            raise ValueError(f"use lomo.db.query.in_list for a list parameter: {compiled.string}")
        self.compiled = compiled
        self.sql = compiled.string
        self.binds: dict[str, Callable[[Any], Any]] = {}
        for bind in visitors.iterate(stmt):
            if isinstance(bind, BindParameter):
                proc = bind.type.dialect_impl(dialect).bind_processor(dialect)
                if proc is not None:
                    self.binds[bind.key] = proc
        columns = _returned(stmt)
        procs: list[Processor] = [
            c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns
        ]
        self.results = procs if any(procs) else None

    def params(self, given: dict[str, Any]) -> dict[str, Any]:
        params = dict(self.compiled.construct_params(given))
        for key, proc in self.binds.items():
            if key in params and params[key] is not None:
                params[key] = proc(params[key])
        return params

    def convert(self, got: Sequence[tuple[Any, ...]]) -> Rows:
        if self.results is None:
            return [tuple(r) for r in got]
        procs = self.results
        return [tuple(p(v) if p else v for p, v in zip(procs, r, strict=True)) for r in got]


def _returned(stmt: Any) -> list[Any]:
    if isinstance(stmt, Select):
        return list(stmt.selected_columns)
    if isinstance(stmt, UpdateBase):
        return list(stmt.exported_columns)
    return []


class PostgresBackend:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.dialect = engine.dialect
        # Keyed by the statement object, which the entry keeps alive.
        self._compiled: dict[int, tuple[Any, _Compiled]] = {}

    def _compile(self, stmt: Any) -> _Compiled:
        got = self._compiled.get(id(stmt))
        if got is None or got[0] is not stmt:
            if len(self._compiled) >= _MAX_COMPILED:
                self._compiled.clear()  # statements are built once; this bounds a misuse
            got = self._compiled[id(stmt)] = (stmt, _Compiled(stmt, self.dialect))
        return got[1]

    @asynccontextmanager
    async def _driver(self) -> AsyncIterator[tuple[AsyncConnection, PgConnection[Any]]]:
        async with self.engine.connect() as conn:
            # Transactions are begun and ended by the batches themselves.
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            raw = await conn.get_raw_connection()
            driver: PgConnection[Any] = raw.driver_connection  # type: ignore[assignment]
            yield conn, driver

    @asynccontextmanager
    async def reads(self) -> AsyncIterator[Batch]:
        async with self._driver() as (conn, pg):

            async def batch(*queries: Query, commit: bool = False) -> list[Rows]:
                return await self._send(conn, pg, queries)

            yield batch

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Batch]:
        async with self._driver() as (conn, pg):
            state = {"open": False, "done": False}

            async def batch(*queries: Query, commit: bool = False) -> list[Rows]:
                if state["done"]:
                    raise RuntimeError("this transaction was committed with its last batch")
                begin, state["open"] = not state["open"], True
                got = await self._send(conn, pg, queries, begin=begin, commit=commit)
                state["done"] = commit
                return got

            try:
                yield batch
            except BaseException:
                if state["open"] and not state["done"] and not pg.closed:
                    await pg.execute("ROLLBACK")
                raise
            if state["open"] and not state["done"]:
                await pg.execute("COMMIT")

    async def _send(
        self,
        conn: AsyncConnection,
        pg: PgConnection[Any],
        queries: Sequence[Query],
        *,
        begin: bool = False,
        commit: bool = False,
    ) -> list[Rows]:
        compiled = [self._compile(q.stmt) for q in queries]
        values = [c.params(q.params) for c, q in zip(compiled, queries, strict=True)]
        try:
            async with pg.pipeline():
                if begin:
                    await pg.execute("BEGIN")
                cursors = []
                for c, v in zip(compiled, values, strict=True):
                    cursors.append(cur := pg.cursor())
                    await cur.execute(c.sql, v)
                if commit:
                    await pg.execute("COMMIT")
            got = [await _rows_of(cur) for cur in cursors]
        except self.dialect.loaded_dbapi.Error as e:
            raise await _as_sqlalchemy(conn, pg, compiled, values, e) from e
        return [c.convert(rows) for c, rows in zip(compiled, got, strict=True)]


async def _rows_of(cur: Any) -> Sequence[tuple[Any, ...]]:
    """A read's rows, a write's RETURNING rows; nothing for a write without RETURNING."""
    res = cur.pgresult
    return await cur.fetchall() if res is not None and res.status == _TUPLES_OK else []


async def _as_sqlalchemy(
    conn: AsyncConnection,
    pg: PgConnection[Any],
    compiled: list[_Compiled],
    values: list[dict[str, Any]],
    e: Any,
) -> DBAPIError:
    """The driver's error as SQLAlchemy's (callers catch one family); a lost connection is
    invalidated so the pool replaces it."""
    dialect = conn.dialect
    raw = await conn.get_raw_connection()
    gone = dialect.is_disconnect(e, raw.dbapi_connection, None) or pg.closed
    if gone:
        await conn.invalidate(e)
    err = DBAPIError.instance(
        ";\n".join(c.sql for c in compiled),
        values[0] if len(values) == 1 else values,
        e,
        dialect.loaded_dbapi.Error,
        connection_invalidated=gone,
        dialect=dialect,
    )
    assert isinstance(err, DBAPIError)
    return err


def backend_for(engine: AsyncEngine) -> SqliteBackend | PostgresBackend:
    if engine.dialect.name == "postgresql":
        return PostgresBackend(engine)
    return SqliteBackend(engine)

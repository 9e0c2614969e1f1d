"""Hot statements: built once, compiled once, and on Postgres run on the driver.

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
The same holds for the step's writes (an INSERT or UPDATE, its RETURNING rows if any): on
Postgres they go on the driver inside the session's transaction; elsewhere through the
session's connection (SQLite's writers' queue is the session's).

Several reads that do not depend on each other are sent together: `execute_all` runs them in
one psycopg pipeline (one round trip; ten small reads cost 0.6 ms of CPU instead of
1.6–2.4 sent one by one, issue 14), and `prefetched` does so for a read phase whose reads
are spread over modules: inside its block a `HotQuery` asked with the same values answers
from what was fetched, once, instead of asking again.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from psycopg import pq
from sqlalchemy import Delete, Insert, Select, Update
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.compiler import SQLCompiler

from lomo.db.begin import COMMITTED_EARLY, check_open, idle, needs_transaction

_TUPLES_OK = pq.ExecStatus.TUPLES_OK
# An expanding parameter as SQLAlchemy's compiler leaves it for execution time.
_EXPANDING_IN = re.compile(r"(NOT )?IN \(__\[POSTCOMPILE_(\w+)\]\)")
Processor = Callable[[Any], Any] | None
AnySelect = Select[*tuple[Any, ...]]
Statement = AnySelect | Insert | Update | Delete


class _Compiled:
    """The statement's Postgres text and what binding and reading it need."""

    def __init__(self, stmt: Statement, dialect: Dialect) -> None:
        compiled = stmt.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        self.compiled = compiled

        def as_any(m: re.Match[str]) -> str:
            op = "<> ALL" if m.group(1) else "= ANY"
            return f"{op}(%({m.group(2)})s)"

        self.sql = _EXPANDING_IN.sub(as_any, compiled.string)
        self.needs_tx = needs_transaction(self.sql)
        if "__[POSTCOMPILE" in self.sql:
            raise ValueError(f"a post-compile parameter this module cannot bind: {self.sql}")
        # By the names the statement renders: an anonymous one (a literal list given to
        # `in_`) differs from its key.
        self.expanding = {compiled.bind_names[b] for b in compiled.binds.values() if b.expanding}
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

    def convert(self, got: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        procs = self.result_processors
        if procs is None:
            return list(got)
        return [tuple(p(v) if p else v for p, v in zip(procs, r, strict=True)) for r in got]


def _no_python_defaults(stmt: Statement) -> None:
    """A column default computed in Python is filled in by SQLAlchemy's execution, which the
    driver path skips: a write must set such columns itself (checked once, on every dialect,
    so a statement that would fail on Postgres fails on SQLite too)."""
    compiled = stmt.compile()
    assert isinstance(compiled, SQLCompiler)
    missing = [c.key for c in (*compiled.insert_prefetch, *compiled.update_prefetch)]
    if missing:
        raise ValueError(f"set these columns explicitly: {', '.join(missing)}")


# Where `prefetched` leaves its rows: the session's info, by query, each with its values.
_PREFETCH = "lomo.hot.prefetched"
Rows = list[tuple[Any, ...]]
_Entry = tuple[dict[str, Any], Rows]


def _freeze(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, set | frozenset):
        return frozenset(v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


def _same(given: dict[str, Any], asked: dict[str, Any]) -> bool:
    """The same values, as bound: a list and a tuple of the same items are. Compared, not
    hashed: a write's values (a step's whole context) were frozen for a key at 0.6 ms of CPU
    per step, and equal values are mostly the very same objects (issue 14)."""
    return given == asked or _freeze(given) == _freeze(asked)


@dataclass(frozen=True, slots=True)
class Bound:
    """One query with its values, to fetch together with others."""

    query: HotQuery
    params: dict[str, Any]

    async def rows(self, s: AsyncSession) -> Rows:
        """`HotQuery.rows` with these values (answered from a prefetch that holds them)."""
        return await self.query.rows(s, **self.params)


class HotQuery:
    """One read, built once with `bindparam`s: `await q.rows(session, name=value, ...)`."""

    def __init__(self, stmt: Statement) -> None:
        if not isinstance(stmt, Select):
            _no_python_defaults(stmt)
        self.stmt = stmt
        self._pg: _Compiled | None = None

    def bind(self, **params: Any) -> Bound:
        return Bound(self, params)

    def sql(self, dialect: Dialect) -> str:
        """The Postgres text this query sends (for tests and EXPLAIN)."""
        return self._compiled(dialect).sql

    def _compiled(self, dialect: Dialect) -> _Compiled:
        if self._pg is None:
            self._pg = _Compiled(self.stmt, dialect)
        return self._pg

    async def rows(self, s: AsyncSession, **params: Any) -> Rows:
        pre: dict[int, list[_Entry]] | None = s.info.get(_PREFETCH)
        if pre and not (s.new or s.dirty or s.deleted):
            for i, (given, got) in enumerate(pre.get(id(self), ())):
                if _same(given, params):
                    del pre[id(self)][i]
                    return got
        return (await execute_all(s, Bound(self, params)))[0]

    async def first(self, s: AsyncSession, **params: Any) -> tuple[Any, ...] | None:
        rows = await self.rows(s, **params)
        return rows[0] if rows else None

    async def scalars(self, s: AsyncSession, **params: Any) -> list[Any]:
        return [r[0] for r in await self.rows(s, **params)]


async def execute_all(s: AsyncSession, *stmts: Bound, commit: bool = False) -> list[Rows]:
    """The rows of each statement, in order (a write's RETURNING rows; none without). On
    Postgres all are sent in one pipeline on the session's connection (after flushing its
    pending changes, as its execute would), led by the BEGIN of the session's transaction
    when one of them writes and none is open yet (lomo/db/begin.py); on other dialects they
    run one after another through the session.

    `commit`: the session's transaction is committed in the same pipeline, after them (one
    round trip less); the session must write nothing more (`CommittedEarly`), its own commit
    then sends nothing. Elsewhere the session commits as usual."""
    if not stmts:
        return []
    if s.get_bind().dialect.name != "postgresql":
        return [await _through_session(s, b) for b in stmts]
    if s.new or s.dirty or s.deleted:
        await s.flush()  # what the session's execute would have done first
    conn = await s.connection()
    dialect = conn.dialect
    compiled = [b.query._compiled(dialect) for b in stmts]
    bound = [c.params(b.params) for c, b in zip(compiled, stmts, strict=True)]  # may raise
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection
    writes = any(c.needs_tx for c in compiled)
    if writes:
        check_open(conn.info)
    begin = writes and idle(driver)
    # Read before the pipeline: inside it the status says nothing about the transaction.
    end = commit and (begin or not idle(driver))
    try:
        if len(stmts) == 1 and not begin and not commit:
            cur = await driver.execute(compiled[0].sql, bound[0])
            got: list[Sequence[tuple[Any, ...]]] = [await _rows_of(cur)]
        else:
            async with driver.pipeline():
                if begin:
                    await driver.execute("BEGIN")
                cursors = []
                for c, b in zip(compiled, bound, strict=True):
                    cursors.append(cur := driver.cursor())
                    await cur.execute(c.sql, b)
                if end:
                    await driver.execute("COMMIT")
            got = [await _rows_of(cur) for cur in cursors]
            if commit:
                conn.info[COMMITTED_EARLY] = True
    except dialect.loaded_dbapi.Error as e:
        # As the session's execute would: a lost connection is invalidated (the pool
        # replaces it), and the error is SQLAlchemy's, so callers catch one family.
        gone = dialect.is_disconnect(e, raw.dbapi_connection, None)
        if gone:
            await conn.invalidate(e)
        raise DBAPIError.instance(
            ";\n".join(c.sql for c in compiled),
            bound[0] if len(bound) == 1 else bound,
            e,
            dialect.loaded_dbapi.Error,
            connection_invalidated=gone,
            dialect=dialect,
        ) from e
    return [c.convert(rows) for c, rows in zip(compiled, got, strict=True)]


async def _rows_of(cur: Any) -> Sequence[tuple[Any, ...]]:
    """A read's rows, a write's RETURNING rows; nothing for a write without RETURNING. Told
    by the result's status: `cur.description` builds the column objects (6 µs a statement,
    about thirty statements a step)."""
    res = cur.pgresult
    return await cur.fetchall() if res is not None and res.status == _TUPLES_OK else []


async def _through_session(s: AsyncSession, b: Bound) -> Rows:
    if isinstance(b.query.stmt, Select):
        return [tuple(r) for r in await s.execute(b.query.stmt, b.params)]
    if s.new or s.dirty or s.deleted:
        await s.flush()
    # Core DML on the session's connection (the session's execute would take a statement
    # on a mapped table for an ORM bulk operation).
    result = await (await s.connection()).execute(b.query.stmt, b.params)
    return [tuple(r) for r in result] if result.returns_rows else []


@asynccontextmanager
async def prefetched(s: AsyncSession, *stmts: Bound, commit: bool = False) -> AsyncIterator[None]:
    """Run `stmts` together now; inside the block `HotQuery.rows` with the same query and
    values answers from them, once each. For a read phase: a pending change in the session
    makes reads ask the database again, and what is left is dropped on leaving (rows read
    before a write of the caller's own would be stale after it). Writes may lead the list:
    the statements run in order, so the reads after them see them. `commit`: as in
    `execute_all`, for a block that writes nothing more."""
    rows = await execute_all(s, *stmts, commit=commit)
    pre: dict[int, list[_Entry]] = s.info.setdefault(_PREFETCH, {})
    mine: list[tuple[int, _Entry]] = []
    for b, got in zip(stmts, rows, strict=True):
        entry = (b.params, got)
        pre.setdefault(id(b.query), []).append(entry)
        mine.append((id(b.query), entry))
    try:
        yield
    finally:
        for qid, entry in mine:
            left = [e for e in pre.get(qid, ()) if e is not entry]
            if left:
                pre[qid] = left
            else:
                pre.pop(qid, None)

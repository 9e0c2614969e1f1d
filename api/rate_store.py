"""Rate buckets shared by the api replicas, one row per key in `rate_buckets`.

Each bucket is the generic cell rate algorithm's single number, `tat`: when the bucket would
be full again. A request is one interval of work; it fits while `tat` stays within `burst`
intervals of now. Taking is one atomic UPSERT (Postgres and SQLite alike): the row is
created, or moved on by an interval when that still fits, and its RETURNING says which.
Time is the database's clock, so replicas on hosts with skewed clocks count alike.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Table,
    bindparam,
    cast,
    delete,
    extract,
    func,
    literal,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite

from lomo.db.engine import Database
from lomo.db.models import RateBucket

_TABLE: Table = RateBucket.__table__  # type: ignore[assignment]
# Buckets full for this long are deleted now and then (a full bucket equals no row).
PRUNE_EVERY_S = 300.0


class SharedBuckets:
    """`burst` takes at once, then `per_minute` evenly, per key, across every process on
    the database."""

    def __init__(self, db: Database, per_minute: int, burst: int) -> None:
        self.db = db
        self.interval = 60.0 / per_minute
        self.span = max(burst, 1) * self.interval  # how far ahead `tat` may run
        self.pg = db.engine.dialect.name == "postgresql"
        self._pruned = time.monotonic()
        # Built once: a request pays for running the statements, not for building them.
        self._take = self._take_statement()
        self._due_of = select(self._due()).where(_TABLE.c.key == bindparam("p_key"))

    def _now(self) -> ColumnElement[float]:
        if self.pg:
            return cast(extract("epoch", func.statement_timestamp()), Float(53))
        # julianday('now') holds for the whole statement; 2440587.5 is the Unix epoch's day.
        return (func.julianday("now") - literal(2440587.5)) * literal(86400.0)

    def _greatest(self, a: Any, b: Any) -> ColumnElement[float]:
        return func.greatest(a, b) if self.pg else func.max(a, b)

    def _due(self) -> ColumnElement[float]:
        """Seconds until one more take fits (negative or 0: it fits now)."""
        now = self._now()
        return self._greatest(_TABLE.c.tat, now) + self.interval - now - self.span

    def _take_statement(self) -> Any:
        now = self._now()
        moved = self._greatest(_TABLE.c.tat, now) + self.interval
        ins = (postgresql.insert if self.pg else sqlite.insert)(_TABLE)
        return (
            ins.values(key=bindparam("p_key"), tat=now + self.interval)
            .on_conflict_do_update(
                index_elements=[_TABLE.c.key],
                set_={"tat": moved},
                where=moved - now <= self.span,
            )
            .returning(_TABLE.c.tat)
        )

    async def take(self, key: str) -> float:
        """0 when the take fits (and is counted), else the seconds until one would."""
        async with self.db.engine.begin() as conn:
            if (await conn.execute(self._take, {"p_key": key})).first() is not None:
                await self._prune(conn)
                return 0.0
            due = await conn.scalar(self._due_of, {"p_key": key})
        return max(float(due or 0.0), 0.001)

    async def wait(self, key: str) -> float:
        """What `take` would answer, without counting anything."""
        async with self.db.engine.connect() as conn:
            due = await conn.scalar(self._due_of, {"p_key": key})
        return max(float(due or 0.0), 0.0)

    async def _prune(self, conn: Any) -> None:
        if time.monotonic() - self._pruned < PRUNE_EVERY_S:
            return
        self._pruned = time.monotonic()
        await conn.execute(delete(_TABLE).where(_TABLE.c.tat < self._now() - PRUNE_EVERY_S))

"""`HotQuery` returns the rows the session returns, on Postgres (the driver path) and on
SQLite (the session path): JSON, timestamps, NULLs, expanding IN and NOT IN with many, one
and no values, JSON paths, and the caller's unflushed and uncommitted changes; and
statements sent together (`execute_all`, a pipeline on Postgres) and prefetched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import bindparam, event, insert, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

import lomo.db.hot as hot
from lomo.db.engine import Database
from lomo.db.hot import HotQuery, execute_all, prefetched
from lomo.db.models import MessageRow, ModelStep, Task
from lomo.ids import new_id
from tests.conftest import PG_ADMIN
from tests.runtime_support import new_user

T0 = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)

STEPS = HotQuery(
    select(
        ModelStep.id,
        ModelStep.turn,
        ModelStep.step,
        ModelStep.response,
        ModelStep.reported_orders,
        ModelStep.created_at,
    )
    .where(ModelStep.task_id == bindparam("task_id"))
    .order_by(ModelStep.id)
)
PREFIX = HotQuery(select(ModelStep.context["prefix"]).where(ModelStep.id == bindparam("id")))
BY_IDS = HotQuery(select(ModelStep.turn).where(ModelStep.id.in_(bindparam("ids", expanding=True))))
NOT_IDS = HotQuery(
    select(MessageRow.id)
    .where(MessageRow.task_id == bindparam("task_id"))
    .where(MessageRow.id.not_in(bindparam("ids", expanding=True)))
    .order_by(MessageRow.id)
)
MSGS = HotQuery(
    select(MessageRow.id, MessageRow.text, MessageRow.processed_turn)
    .where(MessageRow.task_id == bindparam("task_id"), MessageRow.processed_turn.is_(None))
    .order_by(MessageRow.id)
)


async def _task(db: Database) -> tuple[str, str, list[int]]:
    user = await new_user(db)
    task_id = new_id("tsk")
    async with db.session() as s:
        s.add(Task(id=task_id, user_id=user, kind="persistent", status="running", goal="g"))
        await s.flush()
        for i in range(3):
            s.add(
                ModelStep(
                    task_id=task_id,
                    turn=i + 1,
                    step=0,
                    context={"prefix": {"n": i, "keys": ["a", "ü"]}},
                    response={"content": [{"type": "text", "text": f"r{i}"}]},
                    reported_orders=["ord_1"] if i == 1 else None,
                    created_at=T0 + timedelta(minutes=i),
                )
            )
        await s.flush()
        ids = list(await s.scalars(select(ModelStep.id).where(ModelStep.task_id == task_id)))
    return user, task_id, sorted(ids)


async def _session_rows(db: Database, q: HotQuery, **params: Any) -> list[tuple[Any, ...]]:
    async with db.session() as s:
        return [tuple(r) for r in await s.execute(q.stmt, params)]


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)  # SQLite reads timestamps back naive


async def test_rows_match_the_session_and_the_data(db: Database) -> None:
    _, task_id, ids = await _task(db)
    async with db.session() as s:
        rows = await STEPS.rows(s, task_id=task_id)
    assert rows == await _session_rows(db, STEPS, task_id=task_id)
    assert [(r[1], r[3]["content"][0]["text"], r[4]) for r in rows] == [
        (1, "r0", None),
        (2, "r1", ["ord_1"]),
        (3, "r2", None),
    ]
    assert [_utc(r[5]) for r in rows] == [T0 + timedelta(minutes=i) for i in range(3)]
    async with db.session() as s:
        assert await PREFIX.scalars(s, id=ids[1]) == [{"n": 1, "keys": ["a", "ü"]}]
        assert await PREFIX.first(s, id=-1) is None


async def test_expanding_in_binds_any_number_of_values(db: Database) -> None:
    _, _, ids = await _task(db)
    for chosen in (ids, ids[1:2], [], [*ids, 10**9]):
        async with db.session() as s:
            got = sorted(await BY_IDS.scalars(s, ids=chosen))
        assert got == sorted(ids.index(i) + 1 for i in chosen if i in ids)
        assert sorted(r[0] for r in await _session_rows(db, BY_IDS, ids=chosen)) == got


async def test_not_in_and_null_tests(db: Database) -> None:
    user, task_id, _ = await _task(db)
    async with db.session() as s:
        for n, turn in enumerate((None, 4, None)):
            s.add(
                MessageRow(
                    id=f"msg_{task_id}_{n}",
                    user_id=user,
                    task_id=task_id,
                    text=f"m{n}",
                    processed_turn=turn,
                )
            )
    mids = [f"msg_{task_id}_{n}" for n in range(3)]
    async with db.session() as s:
        assert await NOT_IDS.scalars(s, task_id=task_id, ids=mids[:1]) == mids[1:]
        assert await NOT_IDS.scalars(s, task_id=task_id, ids=[]) == mids
        assert await MSGS.rows(s, task_id=task_id) == [
            (mids[0], "m0", None),
            (mids[2], "m2", None),
        ]


LITERAL_IN = HotQuery(
    select(ModelStep.turn)
    .where(ModelStep.task_id == bindparam("task_id"), ModelStep.turn.in_((1, 3)))
    .order_by(ModelStep.turn)
)
LITERAL_NOT_IN_SET = HotQuery(
    update(ModelStep)
    .where(ModelStep.task_id == bindparam("p_task"), ModelStep.turn.not_in((1, 3)))
    .values(step=7)
    .returning(ModelStep.turn, ModelStep.step)
)


async def test_literal_lists_and_literal_values_bind(db: Database) -> None:
    """A literal list given to `in_` gets an anonymous name the statement renders apart
    from its key (a KeyError at execution on Postgres before), and a literal to set."""
    _, task_id, _ = await _task(db)
    async with db.session() as s:
        assert await LITERAL_IN.scalars(s, task_id=task_id) == [1, 3]
        assert await LITERAL_NOT_IN_SET.rows(s, p_task=task_id) == [(2, 7)]


async def test_reads_the_callers_pending_and_uncommitted_changes(db: Database) -> None:
    user, task_id, _ = await _task(db)
    mid = f"msg_{task_id}_p"
    async with db.sessionmaker() as s:
        s.add(MessageRow(id=mid, user_id=user, task_id=task_id, text="pending"))
        # Not flushed: the query flushes first, as the session's execute would.
        assert await MSGS.rows(s, task_id=task_id) == [(mid, "pending", None)]
        await s.rollback()
    async with db.session() as s:
        assert await MSGS.rows(s, task_id=task_id) == []


async def test_postgres_reads_bypass_the_session_execute(db: Database) -> None:
    """On Postgres the rows come from the driver (no statement through SQLAlchemy's
    execution); elsewhere through the session."""
    _, task_id, _ = await _task(db)
    seen: list[str] = []

    def count(_c: Any, _cur: Any, stmt: str, *_: Any) -> None:
        seen.append(stmt)

    event.listen(db.engine.sync_engine, "before_cursor_execute", count)
    try:
        async with db.sessionmaker() as s:
            await s.connection()  # the transaction's own statements are not the query's
            seen.clear()
            assert len(await STEPS.rows(s, task_id=task_id)) == 3
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", count)
    assert len(seen) == (0 if db.engine.dialect.name == "postgresql" else 1)


async def test_a_lost_connection_raises_sqlalchemys_error_and_is_replaced(db: Database) -> None:
    """The server ends the session's connection: the driver path raises a DBAPIError that
    says the connection was invalidated (as the session's execute does), and the next
    session works on a new connection."""
    _, task_id, _ = await _task(db)
    postgres = db.engine.dialect.name == "postgresql"
    async with db.sessionmaker() as s:
        conn = await s.connection()
        if not postgres:  # SQLite has no server to end it: the session path still answers
            assert len(await STEPS.rows(s, task_id=task_id)) == 3
            return
        pid = await conn.scalar(text("SELECT pg_backend_pid()"))
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(DBAPIError) as err:
            await STEPS.rows(s, task_id=task_id)
        assert err.value.connection_invalidated
        await s.rollback()
    async with db.session() as s:
        assert len(await STEPS.rows(s, task_id=task_id)) == 3


async def test_a_missing_parameter_is_an_error_not_a_null(db: Database) -> None:
    """A value left out raises on both paths instead of binding NULL (which would match
    nothing and look like an empty result)."""
    await _task(db)
    async with db.sessionmaker() as s:
        with pytest.raises(SQLAlchemyError, match="task_id"):
            await STEPS.rows(s)


# --- several statements at once: `execute_all` (a pipeline on Postgres) and `prefetched` ---
TASK_TURN = HotQuery(select(Task.turn).where(Task.id == bindparam("task_id")))
SET_TURN = HotQuery(
    update(Task.__table__)  # type: ignore[arg-type]
    .where(Task.__table__.c.id == bindparam("p_id"))
    .values(turn=bindparam("p_turn"), updated_at=bindparam("p_at"))
    .returning(Task.__table__.c.turn)
)
MOVE_STEP = HotQuery(
    update(ModelStep.__table__)  # type: ignore[arg-type]
    .where(ModelStep.__table__.c.id == bindparam("p_id"))
    .values(step=bindparam("p_step"))
)


async def test_execute_all_answers_each_statement_as_alone(db: Database) -> None:
    """Reads and writes sent together give each its own rows, in order; a write without
    RETURNING gives none; the writes are in the caller's transaction."""
    _, task_id, ids = await _task(db)
    async with db.session() as s:
        steps, turn, moved, none, prefix, after = await execute_all(
            s,
            STEPS.bind(task_id=task_id),
            SET_TURN.bind(p_id=task_id, p_turn=7, p_at=T0),
            MOVE_STEP.bind(p_id=ids[0], p_step=5),
            BY_IDS.bind(ids=[]),
            PREFIX.bind(id=ids[2]),
            STEPS.bind(task_id=task_id),
        )
        assert steps == await _session_rows(db, STEPS, task_id=task_id)
        assert turn == [(7,)]
        assert moved == [] and none == []
        assert prefix == [({"n": 2, "keys": ["a", "ü"]},)]
        assert [r[2] for r in after] == [5, 0, 0]  # the write before it is seen
        await s.rollback()
    async with db.session() as s:
        assert await TASK_TURN.scalars(s, task_id=task_id) == [0]


async def test_a_failing_statement_fails_the_batch_and_the_session_recovers(
    db: Database,
) -> None:
    """A unique violation in the middle raises SQLAlchemy's IntegrityError; nothing of the
    batch is kept, and the session works again after its rollback."""
    _, task_id, _ = await _task(db)
    store = HotQuery(
        insert(ModelStep.__table__).values(  # type: ignore[arg-type]
            task_id=bindparam("p_task"),
            turn=bindparam("p_turn"),
            step=0,
            context={},
            response={},
            created_at=bindparam("p_at"),
        )
    )
    async with db.sessionmaker() as s:
        with pytest.raises(IntegrityError):
            await execute_all(
                s,
                SET_TURN.bind(p_id=task_id, p_turn=9, p_at=T0),
                store.bind(p_task=task_id, p_turn=1, p_at=T0),  # (task, 1, 0) exists
                STEPS.bind(task_id=task_id),
            )
        await s.rollback()
        assert await TASK_TURN.scalars(s, task_id=task_id) == [0]
        assert len(await STEPS.rows(s, task_id=task_id)) == 3


def test_a_write_that_needs_a_python_default_is_refused_when_built() -> None:
    """The driver path skips SQLAlchemy's Python-side defaults: a write leaving such a
    column out would insert NULL, so it is refused when built, on every dialect."""
    with pytest.raises(ValueError, match="created_at"):
        HotQuery(insert(ModelStep.__table__).values(task_id=bindparam("t")))  # type: ignore[arg-type]


async def test_prefetched_reads_answer_once_from_what_was_fetched(db: Database) -> None:
    """Inside the block a read with the same values answers from the prefetch (a change
    committed meanwhile is not seen, which shows no second query ran), once; another
    value, a second ask, and any ask after the block go to the database."""
    _, task_id, ids = await _task(db)
    async with db.sessionmaker() as s:
        async with prefetched(s, TASK_TURN.bind(task_id=task_id), BY_IDS.bind(ids=ids[:2])):
            async with db.session() as other:
                await other.execute(update(Task).where(Task.id == task_id).values(turn=3))
            assert await TASK_TURN.scalars(s, task_id=task_id) == [0]  # prefetched
            assert await TASK_TURN.scalars(s, task_id=task_id) == [3]  # asked again
            assert sorted(await BY_IDS.scalars(s, ids=ids[:1])) == [1]  # other values
        assert sorted(await BY_IDS.scalars(s, ids=ids[:2])) == [1, 2]  # dropped on leaving
        await s.rollback()


async def test_a_pending_change_makes_prefetched_reads_ask_again(db: Database) -> None:
    user, task_id, _ = await _task(db)
    mid = f"msg_{task_id}_q"
    async with db.sessionmaker() as s:
        async with prefetched(s, MSGS.bind(task_id=task_id)):
            s.add(MessageRow(id=mid, user_id=user, task_id=task_id, text="pending"))
            assert await MSGS.rows(s, task_id=task_id) == [(mid, "pending", None)]
        await s.rollback()


async def test_a_prefetched_read_answers_for_the_same_values_in_another_sequence(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values are compared as bound: ids prefetched as a list answer an ask with a tuple
    (a write answered from its batch must never run twice)."""
    _, _, ids = await _task(db)
    asked: list[Any] = []
    real = hot.execute_all

    async def counted(*a: Any, **k: Any) -> Any:
        asked.append(a)
        return await real(*a, **k)

    async with db.sessionmaker() as s:
        async with prefetched(s, BY_IDS.bind(ids=list(ids[:2])), BY_IDS.bind(ids=list(ids[:1]))):
            monkeypatch.setattr(hot, "execute_all", counted)
            assert sorted(await BY_IDS.scalars(s, ids=tuple(ids[:1]))) == [1]
            assert sorted(await BY_IDS.scalars(s, ids=tuple(ids[:2]))) == [1, 2]
            assert asked == []
            assert sorted(await BY_IDS.scalars(s, ids=tuple(ids[:2]))) == [1, 2]
            assert len(asked) == 1  # once each
        await s.rollback()

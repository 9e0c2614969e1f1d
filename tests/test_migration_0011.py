"""Migration 0011 copies the jobs a stored step was shown out of its context into
`model_steps.reported_orders` (on both databases), so later steps read them without parsing
every stored context."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from lomo.db.engine import sync_url
from lomo.db.migrate import alembic_config
from tests.conftest import _fresh_pg_url, _pg_available


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"
    if not _pg_available():
        pytest.skip("Postgres not reachable")
    return _fresh_pg_url()


def _required(table: sa.Table, row: dict[str, object]) -> dict[str, object]:
    """`row` plus a value for every other NOT NULL column without a default (as of 0010)."""
    out = dict(row)
    for col in table.columns:
        if col.name in out or col.nullable or col.server_default is not None or col.primary_key:
            continue
        py = col.type.python_type
        out[col.name] = (
            0 if py is int else datetime.now(UTC) if py is datetime else {} if py is dict else ""
        )
    return out


def test_reported_orders_backfilled(url: str) -> None:
    cfg = alembic_config(url)
    command.upgrade(cfg, "0010")
    engine = sa.create_engine(sync_url(url))
    try:
        with engine.begin() as c:
            meta = sa.MetaData()
            meta.reflect(c, only=["users", "tasks", "model_steps"])
            users, tasks, steps = (meta.tables[n] for n in ("users", "tasks", "model_steps"))
            c.execute(users.insert().values(**_required(users, {"id": "u1"})))
            c.execute(tasks.insert().values(**_required(tasks, {"id": "t1", "user_id": "u1"})))
            for step, reported in ((1, ["ord_a", "ord_b"]), (2, []), (3, None)):
                ctx: dict[str, object] = {"layers": [{"name": "x", "text": "long"}]}
                if reported is not None:
                    ctx["reported_orders"] = reported
                row = {
                    "id": step,
                    "task_id": "t1",
                    "turn": 1,
                    "step": step,
                    "context": ctx,
                    "response": {},
                }
                c.execute(steps.insert().values(**_required(steps, row)))
        command.upgrade(cfg, "head")
        with engine.connect() as c:
            got = c.execute(sa.text("SELECT step, reported_orders FROM model_steps ORDER BY step"))
            stored = {s: json.loads(v) if isinstance(v, str) else v for s, v in got}
    finally:
        engine.dispose()
    assert stored == {1: ["ord_a", "ord_b"], 2: None, 3: None}

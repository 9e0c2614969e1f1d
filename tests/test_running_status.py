"""The turn's `running` status is written while the model thinks (after
`running_event_seconds`), or with the decision when the model answers first: never on the
step's path before the model is asked, always before the reply on the person's stream, and
once (journal/running.py). On SQLite and on Postgres."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from temporalio.testing import ActivityEnvironment

from activities.registry import build_activities
from activities.types import StatusInput, StepInput
from llm.types import ModelRequest, ModelResponse
from lomo.db.engine import Database
from lomo.db.models import Event, Task
from lomo.ids import new_id
from lomo.settings import Settings
from tests.runtime_support import add_message, new_user, text


async def _status(db: Database, task_id: str) -> str:
    async with db.session() as s:
        return str(await s.scalar(select(Task.status).where(Task.id == task_id)))


async def _events(db: Database, user: str) -> list[tuple[str, Any]]:
    async with db.session() as s:
        rows = await s.execute(
            select(Event.type, Event.data).where(Event.user_id == user).order_by(Event.seq)
        )
        return [(t, (d or {}).get("status")) for t, d in rows]


class _Model:
    """Answers at once, or after the status says `running` (a model that thinks)."""

    name = "probe"

    def __init__(self, db: Database, task_id: str, think: bool, fail: bool = False) -> None:
        self.db, self.task_id, self.think, self.fail = db, task_id, think, fail
        self.status_when_asked = ""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.status_when_asked = await _status(self.db, self.task_id)
        if self.fail:
            raise RuntimeError("the model is down")
        if self.think:
            async with asyncio.timeout(10):
                # Polled: the write comes from another session, the database is the signal.
                while await _status(self.db, self.task_id) != "running":  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
        return text("Teal it is.")


async def _step(
    db: Database, tmp_path: Path, model: _Model, delay: float, task_id: str, mid: str, user: str
) -> None:
    settings = Settings(
        data_dir=tmp_path, database_url="sqlite://", embedder="fake", running_event_seconds=delay
    )
    async with httpx.AsyncClient() as http:
        acts = {getattr(a, "__name__", ""): a for a in build_activities(settings, db, http, model)}
        running = StatusInput(task_id, "running", "", "persistent")
        await ActivityEnvironment().run(
            acts["model_step"], StepInput(task_id, 1, 1, [mid], user, running)
        )


async def _task(db: Database) -> tuple[str, str, str]:
    user = await new_user(db)
    task_id = new_id("tsk")
    async with db.session() as s:
        s.add(Task(id=task_id, user_id=user, kind="persistent", status="waiting_user", goal="g"))
    return user, task_id, await add_message(db, user, task_id, "Which colour?")


def _status_then_reply(events: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [e for e in events if e[0] in ("task.status", "task.reply")]


async def test_a_fast_answer_writes_running_with_the_decision(db: Database, tmp_path: Path) -> None:
    user, task_id, mid = await _task(db)
    model = _Model(db, task_id, think=False)
    await _step(db, tmp_path, model, 30.0, task_id, mid, user)
    assert model.status_when_asked == "waiting_user"  # nothing written before the model
    assert _status_then_reply(await _events(db, user)) == [
        ("task.status", "running"),
        ("task.reply", None),
    ]
    assert await _status(db, task_id) == "running"
    # Again (a retried step whose decision is stored): nothing new.
    await _step(db, tmp_path, model, 30.0, task_id, mid, user)
    assert len(_status_then_reply(await _events(db, user))) == 2


async def test_a_thinking_model_shows_running_while_it_thinks(db: Database, tmp_path: Path) -> None:
    user, task_id, mid = await _task(db)
    model = _Model(db, task_id, think=True)
    # The model answers only once it sees `running` in the database: the status is
    # committed while it thinks, by the step's own session.
    await _step(db, tmp_path, model, 0.05, task_id, mid, user)
    assert model.status_when_asked == "waiting_user"
    assert _status_then_reply(await _events(db, user)) == [
        ("task.status", "running"),
        ("task.reply", None),
    ]


async def test_a_failed_model_call_leaves_the_status_alone(db: Database, tmp_path: Path) -> None:
    user, task_id, mid = await _task(db)
    with pytest.raises(RuntimeError, match="down"):
        await _step(
            db, tmp_path, _Model(db, task_id, think=False, fail=True), 30.0, task_id, mid, user
        )
    await asyncio.sleep(0.1)
    assert await _status(db, task_id) == "waiting_user"
    assert _status_then_reply(await _events(db, user)) == []

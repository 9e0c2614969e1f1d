"""A model step that knows its person (`StepInput.user_id`, set by the workflow) sends
every read of its path, memory's profile included, in one round trip before it builds the
context; a step scheduled before the field existed reads the task's person first and
builds the same request. A step naming another person than its task's is refused and
writes nothing (issue 14). On SQLite and on Postgres."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

import lomo.db.hot as hot
from activities.registry import build_activities
from activities.types import StatusInput, StepInput
from llm.types import ModelRequest, ModelResponse
from lomo.db.engine import Database
from lomo.db.models import Event, Task
from lomo.ids import new_id
from lomo.settings import Settings
from memory.models import ProfileSnapshot
from tests.runtime_support import add_message, new_user, text


class _Counting:
    """Counts the round trips (`execute_all` calls) made before the model is asked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.trips = 0
        self.at_model: list[int] = []
        self.requests: list[ModelRequest] = []
        real = hot.execute_all

        async def counted(*a: Any, **k: Any) -> Any:
            self.trips += 1
            return await real(*a, **k)

        monkeypatch.setattr(hot, "execute_all", counted)

    name = "counting"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.at_model.append(self.trips)
        self.requests.append(request)
        return text("A3 it is.")


async def _task(db: Database, user: str) -> tuple[str, str]:
    task_id = new_id("tsk")
    async with db.session() as s:
        s.add(Task(id=task_id, user_id=user, kind="persistent", status="waiting_user", goal="g"))
    return task_id, await add_message(db, user, task_id, "Which size for the poster?")


async def test_a_step_sends_its_reads_in_one_trip_and_builds_the_same_request(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(data_dir=tmp_path, database_url="sqlite://", embedder="fake")
    model = _Counting(monkeypatch)
    user = await new_user(db)
    async with db.session() as s:  # a profile, read in the step's trip
        item = {"content": "likes teal", "memory_id": "mem_1", "version": 1, "version_id": "v1"}
        s.add(ProfileSnapshot(user_id=user, version=1, items=[item]))
    async with httpx.AsyncClient() as http:
        acts = {getattr(a, "__name__", ""): a for a in build_activities(settings, db, http, model)}
        env = ActivityEnvironment()
        ids: list[tuple[str, str]] = []
        for known in (user, ""):
            task_id, mid = await _task(db, user)
            ids.append((task_id, mid))
            running = StatusInput(task_id, "running", "", "persistent")
            model.trips = 0
            await env.run(acts["model_step"], StepInput(task_id, 1, 1, [mid], running, None, known))
    # Knowing the person: the step's reads, then the context's messages and bodies (which
    # depend on the steps read in the first). Not knowing: the task's person first. The
    # turn's status is not written before the model is asked (activities/turn_status.py).
    assert model.at_model == [2, 3]
    # The same request, but for the task's and the message's ids.
    seen = []
    for r, (task_id, mid) in zip(model.requests, ids, strict=True):
        seen.append((str(r.system) + str(r.messages)).replace(task_id, "T").replace(mid, "M"))
    assert seen[0] == seen[1]
    assert "likes teal" in seen[0]


async def test_a_step_naming_another_person_is_refused_and_writes_nothing(
    db: Database, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, database_url="sqlite://", embedder="fake")
    owner, stranger = await new_user(db), await new_user(db)
    task_id, mid = await _task(db, owner)
    running = StatusInput(task_id, "running", "", "persistent")

    class Never:
        name = "never"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            raise AssertionError("the model must not be asked")

    async with httpx.AsyncClient() as http:
        acts = {
            getattr(a, "__name__", ""): a for a in build_activities(settings, db, http, Never())
        }
        with pytest.raises(ApplicationError) as err:
            await ActivityEnvironment().run(
                acts["model_step"], StepInput(task_id, 1, 1, [mid], running, None, stranger)
            )
    assert err.value.non_retryable
    async with db.session() as s:
        status = await s.scalar(select(Task.status).where(Task.id == task_id))
        events = list(await s.scalars(select(Event.type).where(Event.user_id == owner)))
    assert status == "waiting_user" and "task.status" not in events

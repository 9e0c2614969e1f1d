"""Which calls are marked `started` before their tool runs.

The mark tells a retried attempt that a call may have acted: a non-idempotent tool then
answers `outcome_unknown` instead of acting twice (tests/test_runtime_kill.py). An
idempotent tool runs again anyway, so its call is neither locked nor marked: the
transaction before it writes nothing and its commit waits for no WAL flush. Each probe
tool below reads its own call's row while it runs, in a transaction of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.registry import build_activities
from activities.types import ToolInput
from cli.worker import make_worker
from llm.types import ModelResponse, TextBlock, ToolSpec, ToolUseBlock, Usage
from lomo.db.context import ToolOutput
from lomo.db.engine import Database
from lomo.db.models import Task, ToolCall
from lomo.ids import new_id
from lomo.settings import Settings
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import new_user, start_task, text
from tools.base import Tool, ToolCallContext, ToolResult


class Probe(Tool):
    def __init__(self, name: str, idempotent: bool, db: Database) -> None:
        self.spec = ToolSpec(name, "Reads its own call (test probe).", {"type": "object"})
        self.idempotent = idempotent
        self.db = db
        self.seen: list[str] = []

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        async with self.db.session() as s:
            status = await s.scalar(select(ToolCall.status).where(ToolCall.call_id == ctx.call_id))
        self.seen.append(str(status))
        return ToolResult("done", {"seen": status})


def _both_calls() -> ModelResponse:
    uses: list[TextBlock | ToolUseBlock] = [
        ToolUseBlock(id="tu_again", name="probe_again", input={}),
        ToolUseBlock(id="tu_once", name="probe_once", input={}),
    ]
    return ModelResponse(uses, "tool_use", Usage(10, 5))


async def test_only_a_non_idempotent_call_is_marked_started_before_it_runs(
    tmp_path: Path, db: Database, db_url: str, temporal_client: Client, task_queue: str
) -> None:
    settings = Settings(data_dir=tmp_path, database_url=db_url, task_queue=task_queue)
    again, once = Probe("probe_again", True, db), Probe("probe_once", False, db)
    provider = ScriptedProvider([_both_calls(), text("Both looked.")])
    async with httpx.AsyncClient() as http:
        acts = build_activities(settings, db, http, provider, extra_tools=[again, once])
        async with make_worker(temporal_client, settings, acts):
            user = await new_user(db)
            task_id, _ = await start_task(
                temporal_client, db, task_queue, user, "Look twice", kind="persistent"
            )

            async def both_ran() -> bool:
                return bool(again.seen and once.seen)

            await eventually(both_ran, within=60)
    assert again.seen == ["planned"]  # no mark: the row as the model step planned it
    assert once.seen == ["started"]
    async with db.session() as s:
        rows = await s.execute(
            select(ToolCall.name, ToolCall.status).where(ToolCall.task_id == task_id)
        )
        final = {name: status for name, status in rows.all()}
    assert final == {"probe_again": "done", "probe_once": "done"}


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_call_named_as_another_tool_is_refused_before_anything_runs(
    tmp_path: Path, db: Database, db_url: str
) -> None:
    """The name decides whether the call is locked and marked: a name that is not the
    planned call's must not let a non-idempotent tool run unmarked."""
    settings = Settings(data_dir=tmp_path, database_url=db_url)
    again, once = Probe("probe_again", True, db), Probe("probe_once", False, db)
    provider = ScriptedProvider([])
    async with httpx.AsyncClient() as http:
        acts = build_activities(settings, db, http, provider, extra_tools=[again, once])
        run_tool = next(a for a in acts if getattr(a, "__name__", "") == "run_tool")
        user = await new_user(db)
        call_id = await _planned_call(db, user, "probe_once")
        with pytest.raises(Exception, match="is a call of probe_once, not probe_again") as e:
            await ActivityEnvironment().run(run_tool, ToolInput("", call_id, name="probe_again"))
    assert getattr(e.value, "non_retryable", False)
    assert once.seen == [] and again.seen == []
    async with db.session() as s:
        status = await s.scalar(select(ToolCall.status).where(ToolCall.call_id == call_id))
    assert status == "planned"


async def _planned_call(db: Database, user_id: str, name: str) -> str:
    task_id = new_id("tsk")
    call_id = f"{task_id}:1:0:0"
    async with db.session() as s:
        s.add(Task(id=task_id, user_id=user_id, kind="persistent", status="running", goal="g"))
        await s.flush()
        s.add(
            ToolCall(
                call_id=call_id,
                task_id=task_id,
                tool_use_id="tu_1",
                name=name,
                input={},
                status="planned",
            )
        )
    return call_id


class Racer(Tool):
    """Stores the call's final result itself while it runs, as a concurrent attempt that
    finished first would, then returns an output large enough to be kept outside."""

    def __init__(self, db: Database) -> None:
        self.spec = ToolSpec("probe_racer", "Loses a race (test probe).", {"type": "object"})
        self.db = db

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        async with self.db.session() as s:
            row = await s.get(ToolCall, ctx.call_id)
            assert row is not None
            row.status, row.result = "done", {"first": True}
        return ToolResult("done", {"text": "x" * 20_000})


async def test_an_attempt_that_finds_the_final_result_stored_returns_it_and_keeps_nothing(
    tmp_path: Path, db: Database, db_url: str
) -> None:
    """The result is written only if no attempt stored the final one first (the UPDATE's own
    condition, no lock read before it); the losing attempt's transaction, with the output it
    would have kept outside the context, is rolled back."""
    settings = Settings(data_dir=tmp_path, database_url=db_url)
    async with httpx.AsyncClient() as http:
        acts = build_activities(settings, db, http, ScriptedProvider([]), [Racer(db)])
        run_tool = next(a for a in acts if getattr(a, "__name__", "") == "run_tool")
        user = await new_user(db)
        call_id = await _planned_call(db, user, "probe_racer")
        task_id = call_id.split(":")[0]
        got = await ActivityEnvironment().run(
            run_tool, ToolInput(task_id, call_id, name="probe_racer")
        )
    assert got.status == "done"
    async with db.session() as s:
        row = await s.get(ToolCall, call_id)
        kept = await s.scalar(select(func.count()).where(ToolOutput.call_id == call_id))
    assert row is not None and (row.status, row.result) == ("done", {"first": True})
    assert kept == 0

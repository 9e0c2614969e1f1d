"""A model step reads the tool calls of the steps its context shows, not every call of its
task: a long task's step does not grow with the calls before its window. The requests stay
whole: the history's tool results are there (test_context_engineering.py checks the rest
of the context over a long run). On SQLite and on Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

import journal.store as store_module
import lomo.clock as clock
from context.segments import ContextPolicy
from context.types import call_order
from journal import statements as st
from journal.backend import Batch
from journal.store import StepStore
from llm.types import ToolResultBlock
from lomo.db.models import Task, ToolCall
from lomo.db.query import Query, Rows
from tests.context_support import Policy, context_now, context_run

SEGMENT, RECENT, TURN = 4, 2, 50
STEPS = 14


class _Recorded:
    """A backend that records how many calls each window read returned."""

    def __init__(self, real: Any, read: list[int]) -> None:
        self.real, self.read = real, read

    def _wrap(self, batch: Batch) -> Batch:
        async def recorded(*queries: Query, commit: bool = False) -> list[Rows]:
            got = await batch(*queries, commit=commit)
            self.read.extend(
                len(r) for q, r in zip(queries, got, strict=True) if q.stmt is st.WINDOW_CALLS
            )
            return got

        return recorded

    @asynccontextmanager
    async def reads(self) -> AsyncIterator[Batch]:
        async with self.real.reads() as batch:
            yield self._wrap(batch)

    def transaction(self) -> Any:
        return self.real.transaction()


async def test_a_step_reads_only_the_calls_of_the_steps_it_shows(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Minutes between steps (each read of the clock moves it one), as in a task worked on
    # over a day: a window read by time would otherwise hold every call of this short run.
    start = datetime(2026, 1, 5, 9, tzinfo=UTC)
    ticks = iter(range(10_000))
    monkeypatch.setattr(clock, "now", lambda: start + timedelta(minutes=next(ticks)))
    read: list[int] = []
    real_init = StepStore.__init__

    def recording(self: StepStore, *a: Any, **k: Any) -> None:
        real_init(self, *a, **k)
        self.backend = _Recorded(self.backend, read)  # type: ignore[assignment]

    monkeypatch.setattr(StepStore, "__init__", recording)
    policy = Policy(TURN, 4000, -1, ())
    size = ContextPolicy(SEGMENT, RECENT)
    async with context_run(
        db_url, tmp_path, policy, context_segment_steps=SEGMENT, context_recent_steps=RECENT
    ) as run:
        for n in range(STEPS):
            await run.step(n)
        async with run.db.session() as s:
            total = await s.scalar(
                select(func.count()).select_from(ToolCall).where(ToolCall.task_id == run.task_id)
            )
            task = await s.get(Task, run.task_id)
        assert task is not None
        # The next step's request is the same when every call of the task is read.
        window = await context_now(run.db, task, run.runtime.tools, size)
        monkeypatch.setattr(store_module, "CALL_TIME_MARGIN", timedelta(days=3650))
        every = await context_now(run.db, task, run.runtime.tools, size)
        loaded = await StepStore(run.db, size).load_step(
            store_module.StepQuery(task.id, task.user_id, task.turn + 1, 1, [])
        )
    assert total is not None and total >= STEPS - 1  # a call at every step but the first's
    # The last step showed the steps after the last closed segment's start, a few calls,
    # and asked the database for those only (the last three reads are the loads above).
    assert 0 < read[-4] < total // 2, (read, total)
    assert read[-3] < read[-2] == total and window.request == every.request
    assert window.layers == every.layers and window.visible_tools == every.visible_tools
    # The calls loaded are exactly those of the steps shown in full.
    shown = {(s.turn, s.step) for s in loaded.data.steps if s.response is not None}
    assert {call_order(c.call_id)[:2] for c in loaded.data.calls} <= shown
    # Every call the history shows was found among them (a call not read shows "missing").
    for request in policy.requests[SEGMENT * 2 :]:
        results = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
        assert results and all('"missing"' not in r.content for r in results)

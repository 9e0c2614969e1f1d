"""A model step reads the tool calls of the steps its context shows, not every call of its
task: a long task's step no longer grows with the calls before its window (issue 14). The
requests stay whole: the history's tool results are there (test_context_engineering.py
checks the rest of the context over a long run). On SQLite and on Postgres."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

import activities.runtime as runtime
import context.build as context
import journal.rows as context_rows
import lomo.db.hot as hot
from context.build import build_context
from context.segments import ContextPolicy
from journal.rows import _WINDOW_CALLS, call_order
from llm.types import ToolResultBlock
from lomo.db.models import Task, ToolCall
from tests.context_support import Policy, context_run

SEGMENT, RECENT, TURN = 4, 2, 50
STEPS = 14


async def test_a_step_reads_only_the_calls_of_the_steps_it_shows(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Minutes between steps (each read of the clock moves it one), as in a task worked on
    # over a day: a window read by time would otherwise hold every call of this short run.
    start = datetime(2026, 1, 5, 9, tzinfo=UTC)
    ticks = iter(range(10_000))
    monkeypatch.setattr(runtime, "now", lambda: start + timedelta(minutes=next(ticks)))
    read: list[int] = []
    real = hot.execute_all

    async def counted(s: Any, *stmts: hot.Bound, **kw: Any) -> list[hot.Rows]:
        got = await real(s, *stmts, **kw)
        read.extend(
            len(rows) for b, rows in zip(stmts, got, strict=True) if b.query is _WINDOW_CALLS
        )
        return got

    monkeypatch.setattr(hot, "execute_all", counted)
    # What each step asked `load_window` for and got: the calls of exactly those steps.
    windows: list[tuple[set[tuple[int, int]], set[str]]] = []
    real_window = context.load_window

    async def recorded(s: Any, task_id: str, steps: list[Any]) -> list[Any]:
        calls = await real_window(s, task_id, steps)
        windows.append(({(st.turn, st.step) for st in steps}, {c.call_id for c in calls}))
        return calls

    monkeypatch.setattr(context, "load_window", recorded)
    policy = Policy(TURN, 4000, -1, ())
    async with context_run(
        db_url, tmp_path, policy, context_segment_steps=SEGMENT, context_recent_steps=RECENT
    ) as run:
        for n in range(STEPS):
            await run.step(n)
        async with run.db.session() as s:
            total = await s.scalar(
                select(func.count()).select_from(ToolCall).where(ToolCall.task_id == run.task_id)
            )
            every_call = set(
                await s.scalars(select(ToolCall.call_id).where(ToolCall.task_id == run.task_id))
            )
            # The next step's request is the same when every call of the task is read.
            task = await s.get(Task, run.task_id)
            assert task is not None
            size = ContextPolicy(SEGMENT, RECENT)
            window = await build_context(s, task, 99, 1, [], run.runtime.tools, policy=size)
            monkeypatch.setattr(context_rows, "CALL_TIME_MARGIN", timedelta(days=3650))
            every = await build_context(s, task, 99, 1, [], run.runtime.tools, policy=size)
    assert total is not None and total >= STEPS - 1  # a call at every step but the first's
    # The last step showed the steps after the last closed segment's start, a few calls,
    # and asked the database for those only (the last two reads are the contexts below).
    assert 0 < read[-3] < total // 2, (read, total)
    for shown, got in windows:
        assert got == {c for c in every_call if call_order(c)[:2] in shown}
    assert read[-2] < read[-1] == total and window.request == every.request
    assert window.layers == every.layers and window.visible_tools == every.visible_tools
    # Every call the history shows was found among them (a call not read shows "missing").
    for request in policy.requests[SEGMENT * 2 :]:
        results = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
        assert results and all('"missing"' not in r.content for r in results)

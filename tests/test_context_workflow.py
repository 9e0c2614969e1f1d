"""Segment summaries through the real TaskWorkflow on a worker: the step that closes a
segment starts `summarize_segment` beside its tool calls, each segment is summarized once,
and the history replays (recorded as tests/histories/task_segments.json with
LOMO_RECORD_HISTORIES=1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.client import Client

from llm.types import ModelRequest, ModelResponse
from lomo.db.context import ContextSegment
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import replay_and_maybe_record, start_task, text, tool_use
from tests.stack import running_stack

STEPS = 9  # tool steps, then a reply: with segments of 3 and 2 recent, segments 0 and 1 close


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_closing_step_summarizes_its_segment_once_beside_its_calls(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    def step(n: int) -> Any:
        def answer(request: ModelRequest) -> ModelResponse:
            return tool_use("list_objects", {}, f"u{n}") if n < STEPS else text("All listed.")

        return answer

    provider = ScriptedProvider([step(n) for n in range(STEPS + 1)])
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        provider=provider,
        context_segment_steps=3,
        context_recent_steps=2,
    ) as st:
        tid, handle = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            "List what we have",
            kind="persistent",
            max_steps_per_turn=STEPS + 5,
        )

        async def waiting() -> bool:
            r = await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)
            return bool(r.json()["status"] in ("waiting_user", "completed"))

        await eventually(waiting, within=60)
        async with st.db.session() as s:
            segs = list(
                await s.scalars(
                    select(ContextSegment)
                    .where(ContextSegment.task_id == tid)
                    .order_by(ContextSegment.segment)
                )
            )
        # 10 steps: closed after step 5 (segment 0) and step 8 (segment 1).
        assert [(g.segment, g.first_step, g.last_step) for g in segs] == [(0, 0, 2), (1, 3, 5)]
        summaries = [r for r in provider.background if r.purpose == "summarize"]
        assert len(summaries) == 2  # once per segment
        events = [e async for e in handle.fetch_history_events()]
        scheduled = [
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in events
            if e.HasField("activity_task_scheduled_event_attributes")
        ]
        assert scheduled.count("summarize_segment") == 2
        await replay_and_maybe_record(temporal_client, f"task:{tid}", "task_segments")

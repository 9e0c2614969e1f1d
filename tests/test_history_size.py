"""Keep workflow history small: 200 steps over a 50 KB context grow the
task's history by a bounded amount per step, independent of the context size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client

from llm.types import ModelRequest, ModelResponse
from lomo.db.migrate import upgrade
from standin.scripted import ScriptedProvider
from tests.runtime_support import start_task, text, tool_use
from tests.stack import running_stack

pytestmark = pytest.mark.slow

STEPS = 200
CONTEXT_BYTES = 50_000
# Per step: two activities (model_step, run_tool) and their workflow tasks, 12 events with
# ids only. Measured 7.5 KB/step in the JSON export (the verbose form `temporal workflow
# show` writes), 1.5 KB as protobuf; a 50 KB context slipping in would break both bounds.
JSON_BYTES_PER_STEP_BOUND = 10_000
PROTO_BYTES_PER_STEP_BOUND = 3_000


async def test_history_stays_small_over_200_steps(
    tmp_path: Path, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'lomo.db'}"
    upgrade(db_url)
    sizes: list[int] = []

    def step(request: ModelRequest) -> ModelResponse:
        sizes.append(len(json.dumps(str(request.messages))))
        if len(sizes) == STEPS:
            return text("All variations reviewed.")
        return tool_use("update_checklist", {"update": []}, f"tu_{len(sizes)}")

    provider = ScriptedProvider([step] * STEPS)
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        brief = "Reference material: " + "lorem ipsum dolor sit amet " * (CONTEXT_BYTES // 27)
        _, handle = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            brief,
            max_steps_per_turn=STEPS + 10,
        )
        assert await handle.result() == "completed"
        history = await handle.fetch_history()
    raw = len(history.to_json().encode())
    proto = sum(len(e.SerializeToString()) for e in history.events)
    print(
        f"\nhistory: {raw} JSON bytes ({raw / STEPS:.0f}/step), {proto} protobuf bytes "
        f"({proto / STEPS:.0f}/step), {len(history.events)} events for {STEPS} steps; "
        f"contexts {min(sizes)}..{max(sizes)} bytes"
    )
    assert min(sizes) >= CONTEXT_BYTES  # every context carried the 50 KB brief
    assert raw / STEPS < JSON_BYTES_PER_STEP_BOUND
    assert proto / STEPS < PROTO_BYTES_PER_STEP_BOUND
    assert raw < 2_000_000  # far from Temporal's 50 MB history limit
    largest = max(len(e.SerializeToString()) for e in history.events)
    assert largest < 16_000  # no payload anywhere near the 2 MB limit

"""Long-lived tasks roll over with continue-as-new when Temporal suggests it (the test
server suggests it after 400 events): state carried compactly, nothing lost or repeated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.client import Client

from llm.types import ModelRequest, ModelResponse
from lomo.db.models import MessageRow, ModelStep
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import start_task, text
from tests.stack import running_stack

pytestmark = pytest.mark.slow
# Messages are sent until the task has rolled over, then a few more: how many events a turn
# costs changes as the runtime gets leaner (local activities cut it), the rule does not.
MAX_MESSAGES = 80
AFTER_ROLLOVER = 3


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # one backend: slow
async def test_persistent_task_rolls_over_and_keeps_going(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    def reply(request: ModelRequest) -> ModelResponse:
        return text("Noted.")

    provider = ScriptedProvider([reply] * (MAX_MESSAGES + 1))
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "Collect ideas", kind="persistent"
        )
        first_run = (await handle.describe()).run_id

        async def status() -> Any:
            return (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()["status"]

        latest = temporal_client.get_workflow_handle(f"task:{tid}")
        sent, rolled_at = 0, None
        while sent < MAX_MESSAGES and (rolled_at is None or sent < rolled_at + AFTER_ROLLOVER):
            await eventually(lambda: _is(status, "waiting_user"), within=60)
            r = await st.api.post(
                f"/v1/tasks/{tid}/messages",
                json={"text": f"idea {sent}", "client_message_id": f"idea-{sent}"},
                headers=st.auth,
            )
            assert r.status_code == 202, r.text
            mid = r.json()["message_id"]
            sent += 1
            await eventually(lambda mid=mid: _processed(st, mid), within=60)
            if rolled_at is None and (await latest.describe()).run_id != first_run:
                rolled_at = sent
        assert rolled_at is not None, f"no rollover in {sent} messages"
        messages = sent

        async def turn_ended() -> Any:
            # The workflow's own status: the DB's "waiting_user" is written by the activity
            # that ended the turn, before the workflow has taken in that activity's result.
            state = await latest.query("state")
            return state if state["status"] == "waiting_user" else None

        state = await eventually(turn_ended, within=60)
        assert state["turn"] == messages + 1 and state["inbox"] == []
        async with st.db.session() as s:
            steps = list(await s.scalars(select(ModelStep).where(ModelStep.task_id == tid)))
            msgs = list(await s.scalars(select(MessageRow).where(MessageRow.task_id == tid)))
        assert sorted(x.turn for x in steps) == list(range(1, messages + 2))
        assert all(m.processed_turn is not None for m in msgs) and len(msgs) == messages + 1
        history = await latest.fetch_history()
        assert len(history.events) < 450  # each run stays near the suggestion


async def _is(status: Any, want: str) -> bool:
    return bool(await status() == want)


async def _processed(st: Any, mid: str) -> bool:
    m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
    return "processed" in m

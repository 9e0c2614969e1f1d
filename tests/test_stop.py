"""A stop while a job runs: the job is cancelled upstream, nothing is woken, the task stays
stopped and refuses new messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import select
from temporalio.client import Client

from lomo.db.models import GenerationOrder
from lomo.states import TERMINAL_ORDER
from tests.helpers import eventually
from tests.stack import running_stack


async def test_stop_while_waiting_cancels_the_job_and_wakes_nothing(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        await st.sim.post("/sim/faults", json={"latency_scale": 40})  # ~4 s job
        r = await st.api.post(
            "/v1/messages", json={"text": "Generate an image of a red tabby cat"}, headers=st.auth
        )
        mid = r.json()["message_id"]

        async def waiting() -> Any:
            m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
            if tid := m["routing"].get("task_id"):
                t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
                return t if t["status"] == "waiting_generation" else None
            return None

        task = await eventually(waiting)
        tid = task["task_id"]
        r = await st.api.post(f"/v1/tasks/{tid}/stop", headers=st.auth)
        assert r.status_code == 200, r.text

        async def ended() -> Any:
            async with st.db.session() as s:
                o = await s.scalar(select(GenerationOrder).where(GenerationOrder.task_id == tid))
                return o if o is not None and o.status in TERMINAL_ORDER else None

        # The job nobody wants any more is cancelled upstream, not paid to its end.
        order = await eventually(ended, within=60)
        assert order.status == "cancelled" and order.object_id is None
        assert (await temporal_client.get_workflow_handle(f"task:{tid}").result()) == "stopped"
        t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
        assert t["status"] == "stopped" and t["artifacts"] == []
        # The stopped task was not woken: after the stop only the runtime says what it
        # cancelled, no model reply.
        ev = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
        events = [json.loads(x[6:]) for x in ev.text.splitlines() if x.startswith("data: ")]
        stopped_at = next(
            i
            for i, e in enumerate(events)
            if e["type"] == "task.status" and e["data"]["status"] == "stopped"
        )
        replies = [e for e in events[stopped_at:] if e["type"] == "task.reply"]
        assert replies and all(e["data"].get("by") == "runtime" for e in replies), replies
        # A stopped task refuses new messages with a clear reason.
        r = await st.api.post(f"/v1/tasks/{tid}/messages", json={"text": "more"}, headers=st.auth)
        assert r.status_code in (404, 409) and r.json()["error"] in ("conflict", "not_found")

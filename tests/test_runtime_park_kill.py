"""A worker killed while its task waits on a generation job: the job's completion, after a
new worker starts, resumes the task exactly once (one presentation, one asset; the model,
asked once for the plan, is not woken for a result that is the answer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.client import Client

from lomo.db.models import GenerationOrder, ModelStep
from tests.helpers import eventually
from tests.runtime_support import Workers, kill, worker_env
from tests.stack import running_stack

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # one backend: slow
async def test_completion_after_worker_death_resumes_once(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, in_process_worker=False
    ) as st:
        env = worker_env(
            tmp_path,
            db_url,
            temporal_server,
            task_queue,
            LOMO_API_PORT=str(st.settings.api_port),
            LOMO_SIM_PORT=str(st.settings.sim_port),
            LOMO_MODEL_PROVIDER="offline",
            LOMO_GENERATION_WAIT_SECONDS="300",  # the callback, not the poll, must wake it
        )
        with Workers(env, tmp_path) as workers:
            first = workers.spawn("w1")
            await st.sim.post("/sim/faults", json={"latency_scale": 80})  # a job of seconds
            r = await st.api.post(
                "/v1/messages",
                json={"text": "Generate an image of a red tabby cat"},
                headers=st.auth,
            )
            mid = r.json()["message_id"]

            async def waiting() -> Any:
                m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
                if tid := m["routing"].get("task_id"):
                    t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
                    return t if t["status"] == "waiting_generation" else None
                return None

            tid = (await eventually(waiting, within=90))["task_id"]
            kill(first)

            async def order_done() -> Any:
                async with st.db.session() as s:
                    o = await s.scalar(
                        select(GenerationOrder).where(GenerationOrder.task_id == tid)
                    )
                    return o if o is not None and o.status == "succeeded" else None

            await eventually(order_done, within=90)  # the callback landed while no worker ran
            workers.spawn("w2")
            handle = temporal_client.get_workflow_handle(f"task:{tid}")
            assert await handle.result() == "completed"
        ev = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
        events = [json.loads(x[6:]) for x in ev.text.splitlines() if x.startswith("data: ")]
        mine = [e for e in events if e["data"].get("task_id") == tid]
        replies = [e for e in mine if e["type"] == "task.reply"]
        assert [e["type"] for e in mine].count("generation.completed") == 1
        assert [r["data"]["text"].split(" “")[0] for r in replies] == [
            "I'm making the image",
            "Here is your image",
        ]
        async with st.db.session() as s:
            steps = list(await s.scalars(select(ModelStep).where(ModelStep.task_id == tid)))
        assert [(x.turn, x.step) for x in steps] == [(1, 1)]
        task = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
        assert task["status"] == "completed" and len(task["artifacts"]) == 1

"""A worker stopped by SIGTERM (a rolling update, `docker stop`) drains: it stops polling,
lets the running tool call finish, and exits; the call is done once, not `outcome_unknown`
on a second worker. A pod's grace period longer than the heartbeat timeout gives it that
time (deploy/helm/lomo)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from sqlalchemy import select
from temporalio.client import Client

from lomo.db.engine import Database
from lomo.db.models import ToolCall
from standin.server import create_standin_app
from tests.helpers import ThreadServer, eventually
from tests.runtime_support import (
    Workers,
    call_then_report,
    new_user,
    standin_worker_env,
    start_task,
)

pytestmark = pytest.mark.slow
HOLD_SECONDS = 4.0


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # one backend: slow
async def test_sigterm_lets_the_running_call_finish(
    tmp_path: Path,
    db: Database,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
) -> None:
    responder = call_then_report(
        "probe_once", {"hold_s": HOLD_SECONDS, "label": "drained"}, "toolu_drain_1", "Seen: "
    )
    with ThreadServer(create_standin_app(responder)) as model_server:
        env = standin_worker_env(
            tmp_path, db_url, temporal_server, task_queue, model_server.url, LOMO_TEST_TOOLS="1"
        )
        with Workers(env, tmp_path) as workers:
            first = workers.spawn("worker1")
            user = await new_user(db)
            task_id, handle = await start_task(
                temporal_client, db, task_queue, user, "make a poster", heartbeat_timeout_seconds=5
            )
            probes = tmp_path / "probes"

            async def started() -> bool:
                return any(probes.glob("started-probe_once-*"))

            await eventually(started, within=60)
            first.send_signal(signal.SIGTERM)
            stopped = time.monotonic()
            # The next step needs a worker: the second one takes the task from here.
            workers.spawn("worker2")
            assert first.wait(timeout=60) == 0
            # It waited for the call (held HOLD_SECONDS from its start) before exiting.
            assert time.monotonic() - stopped > HOLD_SECONDS / 2
            assert await handle.result() == "completed"
    async with db.session() as s:
        call = await s.get(ToolCall, f"{task_id}:1:1:0")
        calls = list(await s.scalars(select(ToolCall).where(ToolCall.task_id == task_id)))
    assert call is not None and call.status == "done", [c.status for c in calls]
    lines = (probes / "executions.jsonl").read_text().splitlines()
    assert [json.loads(line)["call_id"] for line in lines] == [f"{task_id}:1:1:0"]

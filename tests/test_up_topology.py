"""`lomo up --workers 2 --apis 2` on Postgres as a person runs it: the memory service,
two workers and two api replicas on one machine, real processes.

A picture request sent to the first api is followed and fetched through the second; the
worker that wrote a memory (through the memory service) is SIGKILLed while the task runs
and stays down (a long restart backoff), so the task completes on the other worker, and
the next task's context, built on that other worker, recalls the memory by vector search.
Results are polled over HTTP: the second api's event stream sees the worker's events
through the host's bell and its poll, which this test does not depend on.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.conftest import _drop_pg, _fresh_pg_url, _pg_available
from tests.up_support import running_up, until, up_env

pytestmark = pytest.mark.slow

PASTEL = "I usually like warm pastel tones."
CAT = "Generate an image of a red tabby cat"
RUNNING = ("running", "waiting_generation", "waiting_user")


@pytest.fixture
def pg_url() -> Iterator[str]:
    if not _pg_available():
        if os.environ.get("CI") == "true":
            pytest.fail("Postgres is unreachable under CI=true")
        pytest.skip("Postgres not reachable")
    url = _fresh_pg_url()
    yield url
    _drop_pg(url)


def _task_of(api: httpx.Client, mid: str) -> dict[str, Any] | None:
    tid = api.get(f"/v1/messages/{mid}").json()["routing"].get("task_id")
    return api.get(f"/v1/tasks/{tid}").json() if tid else None


def _post(api: httpx.Client, text: str) -> str:
    r = api.post("/v1/messages", json={"text": text})
    assert r.status_code == 202, r.text
    return str(r.json()["message_id"])


def _completed(api: httpx.Client, mid: str) -> dict[str, Any] | None:
    t = _task_of(api, mid)
    return t if t is not None and t["status"] == "completed" else None


def _pastel_memory(api: httpx.Client) -> bool:
    items = api.get("/v1/memory").json()["memories"]
    return any("pastel" in str(m.get("content", "")) for m in items)


def _demo_user(pg_url: str) -> str:
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        row = conn.execute("SELECT id FROM users WHERE name = 'demo'").fetchone()
    assert row is not None
    return str(row[0])


async def _extract_pids(temporal_address: str, user_id: str) -> set[int]:
    """The pids of the workers that ran the person's memory jobs (an activity's worker
    identity is `pid@host`; its started event is in the history once it completed)."""
    client = await Client.connect(temporal_address)
    history = await client.get_workflow_handle(f"memory:{user_id}").fetch_history()
    return {
        int(e.activity_task_started_event_attributes.identity.split("@", 1)[0])
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    }


def test_two_workers_two_apis_share_memory_and_survive_a_worker(
    tmp_path: Path, pg_url: str
) -> None:
    data_dir = tmp_path / "data"
    # A killed worker stays down for the test: only the other one can finish the work.
    env = up_env(
        LOMO_EMBEDDER="fake",
        LOMO_SIM_SPEED="0.3",
        LOMO_RESTART_INITIAL_SECONDS="600",
        LOMO_RESTART_MAX_SECONDS="600",
        LOMO_DATABASE_URL=pg_url,
        # No profile: a memory reaches a context only through the vector search.
        LOMO_MEMORY_PROFILE_ITEMS="0",
    )
    # Seven processes start on a shared 2-core machine: more time than one of each needs.
    with running_up(data_dir, env, "--workers", "2", "--apis", "2", within=300) as stack:
        assert {"temporal", "sim", "memory", "worker", "worker-2", "api", "api-2"} == set(
            stack["pids"]
        )
        urls = stack["api_urls"]
        assert len(urls) == 2 and urls[0] == stack["api_url"] and urls[0] != urls[1]
        auth = {"Authorization": f"Bearer {stack['demo_token']}"}
        with (
            httpx.Client(base_url=urls[0], headers=auth, timeout=30) as api1,
            httpx.Client(base_url=urls[1], headers=auth, timeout=30) as api2,
        ):
            for api in (api1, api2):
                ready = api.get("/readyz").json()
                assert ready["ready"] and ready["checks"]["memory"] == "ok", ready
            _post(api1, PASTEL)
            until(lambda: _pastel_memory(api2), 60, "the memory written, seen from api 2")
            user_id = _demo_user(pg_url)
            [writer_pid] = until(
                lambda: asyncio.run(_extract_pids(stack["temporal_address"], user_id)),
                30,
                "the memory job's worker in the history",
            )
            names = {pid: name for name, pid in stack["pids"].items()}
            writer = names[writer_pid]
            assert writer in ("worker", "worker-2")

            mid = _post(api1, CAT)
            seen = until(
                lambda: (t := _task_of(api2, mid)) and t["status"] in RUNNING and t, 60, "running"
            )
            os.kill(writer_pid, signal.SIGKILL)
            task = until(lambda: _completed(api2, mid), 180, "the task completed on the other")
            blob = api2.get(f"/v1/objects/{task['artifacts'][0]}/blob").content
            assert blob.startswith(b"\x89PNG")
            assert seen["status"] != "completed"
            state = json.loads((data_dir / "stack.json").read_text())["processes"][writer]
            assert state["state"] == "backoff" and state["restarts"] == 0, state

            # Built on the surviving worker only: the memory comes back by vector search.
            mid = _post(api1, "Generate an image of a grey cat")
            again = until(lambda: _completed(api2, mid), 180, "a second task completed")
            r = api2.get(f"/v1/tasks/{again['task_id']}/context")
            text = "\n".join(layer["text"] for layer in r.json()["layers"])
            assert "[runtime] memory: Usually likes warm pastel tones" in text, text[-2000:]
            assert "degraded: memory" not in text

"""The vertical slice over real HTTP, a real worker and the real dev server."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

from PIL import Image
from temporalio.client import Client
from temporalio.worker import Replayer

from cli.worker import WORKFLOWS
from tests.helpers import eventually
from tests.stack import Stack, running_stack

HISTORIES = Path(__file__).parent / "histories"


async def _events(stack: Stack) -> list[dict[str, Any]]:
    r = await stack.api.get("/v1/events", params={"once": "true"}, headers=stack.auth)
    assert r.status_code == 200
    return [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]


async def run_cat_slice(stack: Stack, text: str) -> dict[str, Any]:
    r = await stack.api.post("/v1/messages", json={"text": text}, headers=stack.auth)
    assert r.status_code == 202, r.text
    mid = r.json()["message_id"]
    assert r.json()["routing"] == {"status": "pending", "deterministic": False}

    async def routed() -> Any:
        m = (await stack.api.get(f"/v1/messages/{mid}", headers=stack.auth)).json()
        return m if m["routing"].get("task_id") else None

    msg = await eventually(routed)
    assert msg["routing"]["decision"] == "lightweight"
    task_id = msg["routing"]["task_id"]

    async def done() -> Any:
        t = (await stack.api.get(f"/v1/tasks/{task_id}", headers=stack.auth)).json()
        return t if t["status"] in ("completed", "failed") else None

    task = await eventually(done, within=60)
    assert task["status"] == "completed", task
    assert task["kind"] == "lightweight"
    assert len(task["artifacts"]) == 1
    listed = (await stack.api.get("/v1/tasks?include_lightweight=true", headers=stack.auth)).json()[
        "tasks"
    ]
    assert next(t for t in listed if t["task_id"] == task_id)["artifacts"] == task["artifacts"]
    hidden = (await stack.api.get("/v1/tasks", headers=stack.auth)).json()["tasks"]
    assert task_id not in [t["task_id"] for t in hidden]  # lightweight stays out of the list
    return task


async def test_cat_image_slice(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        task = await run_cat_slice(st, "Generate an image of a red tabby cat")
        obj_id = task["artifacts"][0]
        blob = await st.api.get(f"/v1/objects/{obj_id}/blob", headers=st.auth)
        assert blob.status_code == 200
        assert blob.headers["content-type"] == "image/png"
        assert Image.open(io.BytesIO(blob.content)).size == (512, 512)
        obj = (await st.api.get(f"/v1/objects/{obj_id}", headers=st.auth)).json()
        assert obj["type"] == "asset" and obj["task_ids"] == [task["task_id"]]
        assert obj["created_by"].startswith(f"task:{task['task_id']}:")
        types = [e["type"] for e in await _events(st)]
        for expected in ("task.created", "generation.progress", "generation.completed"):
            assert expected in types, types
        assert types.index("task.created") < types.index("generation.completed")
        # Exactly one upstream job for one request.
        jobs = (await st.sim.get("/jobs")).json()["jobs"]
        assert len(jobs) == 1
        # The model's reply is in the person's language.
        replies = [e["data"]["text"] for e in await _events(st) if e["type"] == "task.reply"]
        assert replies[-1].startswith("Here is your image")


async def test_german_slice_answers_in_german(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        task = await run_cat_slice(st, "Generiere ein Bild einer roten Tigerkatze")
        assert task["language"] == "de"
        replies = [e["data"]["text"] for e in await _events(st) if e["type"] == "task.reply"]
        assert replies[-1].startswith("Hier ist dein Bild")


async def test_slice_histories_replay_and_stay_small(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """Replays the live histories of a slice against the current code; with
    LOMO_RECORD_HISTORIES=1 it also writes them to tests/histories/ for test_replay.py."""
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        task = await run_cat_slice(st, "Generate an image of a red tabby cat")
    replayer = Replayer(workflows=WORKFLOWS)
    for wf_id, name in ((f"task:{task['task_id']}", "task_slice"), (f"main:{st.user_id}", "main")):
        history = await temporal_client.get_workflow_handle(wf_id).fetch_history()
        await replayer.replay_workflow(history)
        size = len(history.to_json())
        # No prompt or image bytes travel through history: a whole slice stays tiny.
        assert size < 64_000, (wf_id, size)
        if os.environ.get("LOMO_RECORD_HISTORIES") == "1" and db_url.startswith("sqlite"):
            (HISTORIES / f"{name}.json").write_text(history.to_json())

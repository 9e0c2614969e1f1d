"""`lomo up` as a person runs it: real processes, SIGTERM, restart on the same data dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import free_port

pytestmark = pytest.mark.slow


def _start(data_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "up", "--data-dir", str(data_dir)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    stack_file = data_dir / "stack.json"
    deadline = time.monotonic() + 120
    while not stack_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out = proc.stdout.read().decode() if proc.stdout else ""
            proc.kill()
            raise AssertionError(f"lomo up did not become ready:\n{out[-3000:]}")
        time.sleep(0.2)
    return proc, json.loads(stack_file.read_text())


def _stop(proc: subprocess.Popen[bytes], stack: dict[str, Any]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    for name, pid in stack["pids"].items():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        # A zombie that is already reaped by init is fine; a live child is not.
        status = Path(f"/proc/{pid}/status").read_text() if Path(f"/proc/{pid}").exists() else ""
        assert "zombie" in status or not status, f"{name} (pid {pid}) still running"


def _events(api: httpx.Client) -> list[dict[str, Any]]:
    r = api.get("/v1/events", params={"once": "true"})
    return [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]


def test_up_slice_sigterm_restart_keeps_everything(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = dict(
        os.environ,
        LOMO_API_PORT=str(free_port()),
        LOMO_TEMPORAL_PORT=str(free_port()),
        LOMO_TEMPORAL_UI_PORT=str(free_port()),
        LOMO_SIM_PORT=str(free_port()),
        LOMO_SIM_SPEED="0.05",
        LOMO_MODEL_PROVIDER="offline",
    )
    env.pop("LOMO_DATA_DIR", None)
    env.pop("LOMO_DATABASE_URL", None)
    proc, stack = _start(data_dir, env)
    try:
        for key in ("api_url", "temporal_address", "temporal_ui_url", "sim_url", "admin_token"):
            assert stack[key]
        assert set(stack["pids"]) == {"temporal", "worker", "api", "sim"}
        auth = {"Authorization": f"Bearer {stack['demo_token']}"}
        with httpx.Client(base_url=stack["api_url"], headers=auth, timeout=30) as api:
            r = api.post("/v1/messages", json={"text": "Generate an image of a red tabby cat"})
            assert r.status_code == 202, r.text
            mid = r.json()["message_id"]
            deadline = time.monotonic() + 90
            task: dict[str, Any] = {}
            while time.monotonic() < deadline:
                m = api.get(f"/v1/messages/{mid}").json()
                if tid := m["routing"].get("task_id"):
                    task = api.get(f"/v1/tasks/{tid}").json()
                    if task["status"] == "completed":
                        break
                time.sleep(0.3)
            assert task.get("status") == "completed", task
            obj_id = task["artifacts"][0]
            blob = api.get(f"/v1/objects/{obj_id}/blob").content
            assert blob.startswith(b"\x89PNG")
            events_before = _events(api)
            ui = httpx.get(stack["temporal_ui_url"], timeout=10)
            assert ui.status_code == 200
    finally:
        _stop(proc, stack)
    assert not (data_dir / "stack.json").exists()

    proc, stack2 = _start(data_dir, env)
    try:
        assert stack2["demo_token"] == stack["demo_token"]
        auth = {"Authorization": f"Bearer {stack2['demo_token']}"}
        with httpx.Client(base_url=stack2["api_url"], headers=auth, timeout=30) as api:
            again = api.get(f"/v1/tasks/{task['task_id']}").json()
            assert again["status"] == "completed" and again["artifacts"] == [obj_id]
            assert api.get(f"/v1/objects/{obj_id}/blob").content == blob
            assert _events(api) == events_before
            # Resumable: after the last seen id nothing is replayed twice.
            last = events_before[-1]["seq"]
            r = api.get("/v1/events", params={"once": "true"}, headers={"Last-Event-ID": str(last)})
            assert "data: " not in r.text
    finally:
        _stop(proc, stack2)

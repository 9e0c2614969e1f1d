"""`lomo up` as a person runs it: real processes, SIGTERM, restart on the same data dir."""

from __future__ import annotations

import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from lomo.settings import FIXED_SECRETS
from tests.up_support import all_events, start_up, stop_up, up_env

pytestmark = pytest.mark.slow


def test_up_slice_sigterm_restart_keeps_everything(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = up_env()
    proc, stack = start_up(data_dir, env)
    try:
        for key in ("api_url", "temporal_address", "temporal_ui_url", "sim_url", "admin_token"):
            assert stack[key]
        assert set(stack["pids"]) == {"temporal", "memory", "worker", "api", "sim"}
        assert stack["api_urls"] == [stack["api_url"]]
        _secrets_are_private_to_this_install(data_dir, stack)
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
            events_before = all_events(api)
            ui = httpx.get(stack["temporal_ui_url"], timeout=10)
            assert ui.status_code == 200
    finally:
        stop_up(proc, stack)
    assert not (data_dir / "stack.json").exists()

    proc, stack2 = start_up(data_dir, env)
    try:
        assert stack2["demo_token"] == stack["demo_token"]
        for name in SECRETS:  # generated once per data dir, reused by every later start
            assert stack2[name] == stack[name]
        auth = {"Authorization": f"Bearer {stack2['demo_token']}"}
        with httpx.Client(base_url=stack2["api_url"], headers=auth, timeout=30) as api:
            again = api.get(f"/v1/tasks/{task['task_id']}").json()
            assert again["status"] == "completed" and again["artifacts"] == [obj_id]
            assert api.get(f"/v1/objects/{obj_id}/blob").content == blob
            assert all_events(api) == events_before
            # Resumable: after the last seen id nothing is replayed twice.
            last = events_before[-1]["seq"]
            r = api.get("/v1/events", params={"once": "true"}, headers={"Last-Event-ID": str(last)})
            assert "data: " not in r.text
    finally:
        stop_up(proc, stack2)


SECRETS = ("admin_token", "callback_secret", "sim_token")


def _secrets_are_private_to_this_install(data_dir: Path, stack: dict[str, Any]) -> None:
    """Random secrets in owner-only files, the same in stack.json (owner-only too); the
    simulator's listing needs its token."""
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((data_dir / "stack.json").stat().st_mode) == 0o600
    for name in SECRETS:
        assert stat.S_IMODE((data_dir / name).stat().st_mode) == 0o600
        assert stack[name] == (data_dir / name).read_text().strip()
        assert stack[name] not in FIXED_SECRETS.values() and len(stack[name]) >= 32
    assert httpx.get(f"{stack['sim_url']}/jobs", timeout=10).status_code == 401
    auth = {"Authorization": f"Bearer {stack['sim_token']}"}
    assert httpx.get(f"{stack['sim_url']}/jobs", headers=auth, timeout=10).status_code == 200
    url = f"{stack['api_url']}/v1/admin/users"
    for token, status in ((FIXED_SECRETS["admin_token"], 401), (stack["admin_token"], 201)):
        r = httpx.post(url, json={"name": "ops"}, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == status, r.text


def test_up_refuses_a_port_another_server_holds(tmp_path: Path) -> None:
    """A port held by some other server is named and refused before anything starts (CI once
    saw `lomo up` take a stranger's 404 on the api port for its own api's readiness)."""
    env = up_env()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", int(env["LOMO_API_PORT"])))
        holder.listen()
        out = subprocess.run(
            [sys.executable, "-m", "cli.main", "up", "--data-dir", str(tmp_path / "data")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 1
    assert f"api (LOMO_API_PORT) 127.0.0.1:{env['LOMO_API_PORT']}" in out.stdout + out.stderr
    assert not (tmp_path / "data" / "stack.json").exists()
    assert not (tmp_path / "data" / "logs" / "temporal.log").exists()  # nothing was started

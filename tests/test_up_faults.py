"""`lomo up` keeps the platform up when one of its processes dies, on the real
stack as a person runs it: each part is SIGKILLed as a crash or the OOM killer would, and
the supervisor starts it again while the person's work goes on.

One stack serves the scenarios in order (each leaves it healthy for the next):
- the worker dies during a paid generation job and then crash-loops (a test-only hook makes
  every start exit at once): the api answers and accepts messages throughout, the loop
  backs off and is reported in stack.json, and once the worker can start again both tasks
  complete, with exactly one upstream job each;
- the api dies while an SSE client listens: the client reconnects with `Last-Event-ID` and
  has every event exactly once, including those written while the api was down;
- the Temporal dev server dies while a task is parked on a job: it is restarted on the
  same database file and the task completes.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.up_support import all_events, start_up, stop_up, until, up_env

pytestmark = pytest.mark.slow

CAT = "Generate an image of a red tabby cat"


def _stack(data_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((data_dir / "stack.json").read_text())
    return data


def _task_of(api: httpx.Client, mid: str) -> dict[str, Any] | None:
    m = api.get(f"/v1/messages/{mid}").json()
    tid = m["routing"].get("task_id")
    return api.get(f"/v1/tasks/{tid}").json() if tid else None


def _status(api: httpx.Client, mid: str, status: str) -> dict[str, Any] | None:
    t = _task_of(api, mid)
    return t if t is not None and t["status"] == status else None


def _post(api: httpx.Client, text: str) -> str:
    r = api.post("/v1/messages", json={"text": text})
    assert r.status_code == 202, r.text
    mid: str = r.json()["message_id"]
    return mid


def _kill(data_dir: Path, part: str) -> int:
    old: int = _stack(data_dir)["pids"][part]
    os.kill(old, signal.SIGKILL)
    return old


def _sim_auth(data_dir: Path) -> dict[str, str]:
    return {"Authorization": f"Bearer {_stack(data_dir)['sim_token']}"}


def _jobs(sim_url: str, data_dir: Path) -> list[dict[str, Any]]:
    r = httpx.get(f"{sim_url}/jobs", headers=_sim_auth(data_dir), timeout=10)
    jobs: list[dict[str, Any]] = r.json()["jobs"]
    return jobs


class SseClient(threading.Thread):
    """Listens to /v1/events like a browser's EventSource: on any break it reconnects
    with the last id it saw in `Last-Event-ID`."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(daemon=True)
        self.url, self.token = url, token
        self.seqs: list[int] = []
        self.reconnects = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            headers = {"Authorization": f"Bearer {self.token}"}
            if self.seqs:
                headers["Last-Event-ID"] = str(self.seqs[-1])
            try:
                # No read timeout: only a real break (the api died) ends a stream.
                timeout = httpx.Timeout(5, read=None)
                with httpx.stream("GET", self.url, headers=headers, timeout=timeout) as r:
                    for line in r.iter_lines():
                        if line.startswith("id: "):
                            self.seqs.append(int(line[4:]))
                        if self.done.is_set():
                            return
            except httpx.HTTPError:
                pass
            if not self.done.is_set():
                self.reconnects += 1
                time.sleep(0.3)


def test_each_part_dies_and_the_platform_stays_up(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    crash = tmp_path / "worker-crashes"
    env = up_env(
        LOMO_RESTART_INITIAL_SECONDS="0.2",
        LOMO_RESTART_MAX_SECONDS="1.6",
        LOMO_RESTART_RESET_SECONDS="30",
        LOMO_HEARTBEAT_TIMEOUT_SECONDS="2",  # a dead worker's activity is retried soon
        LOMO_GENERATION_WAIT_SECONDS="3",  # the compensating poll, for callbacks lost
        LOMO_FAULT_WORKER_EXIT_FILE=str(crash),
    )
    proc, stack = start_up(data_dir, env)
    try:
        auth = {"Authorization": f"Bearer {stack['demo_token']}"}
        sim_url = stack["sim_url"]
        with httpx.Client(base_url=stack["api_url"], headers=auth, timeout=30) as api:
            _worker_dies_mid_job_then_crash_loops(api, data_dir, sim_url, crash)
            _api_dies_under_an_sse_client(api, data_dir, sim_url, stack)
            _temporal_dies_while_a_task_is_parked(api, data_dir, sim_url)
            assert proc.poll() is None, "lomo up itself must not have stopped"
            restarts = _stack(data_dir)["restarts"]
            assert restarts["worker"] >= 4 and restarts["api"] == 1
            assert restarts["temporal"] == 1 and restarts["sim"] == 0
    finally:
        stop_up(proc, stack)


def _worker_dies_mid_job_then_crash_loops(
    api: httpx.Client, data_dir: Path, sim_url: str, crash: Path
) -> None:
    httpx.post(
        f"{sim_url}/sim/faults",
        headers=_sim_auth(data_dir),
        json={"latency_scale": 100},
        timeout=10,
    )  # seconds
    first = _post(api, CAT)
    until(lambda: _status(api, first, "waiting_generation"), 90, "the job is running")
    assert [j["status"] for j in _jobs(sim_url, data_dir)] in (["queued"], ["running"])
    crash.touch()  # from now on every worker start exits at once
    old = _kill(data_dir, "worker")
    # The api answers and accepts messages while no worker runs.
    assert api.get("/healthz").status_code == 200
    second = _post(api, "Generate an image of a blue parrot")
    assert api.get(f"/v1/messages/{second}").status_code == 200

    def looping() -> dict[str, Any] | None:
        w = _stack(data_dir)["processes"]["worker"]
        return w if w["restarts"] >= 4 else None

    w = until(looping, 60, "the crash loop is reported")
    # Backing off, not spinning: each delay doubles up to the cap, every exit is recorded.
    assert w["delays"][:4] == [0.2, 0.4, 0.8, 1.6] and w["last_exit"] == 3
    assert w["pid"] != old
    assert (data_dir / "logs").is_dir()
    crash.unlink()
    done = until(lambda: _status(api, first, "completed"), 120, "the paid task completes")
    assert api.get(f"/v1/objects/{done['artifacts'][0]}/blob").content.startswith(b"\x89PNG")
    until(lambda: _status(api, second, "completed"), 120, "the message sent meanwhile")
    assert _stack(data_dir)["processes"]["worker"]["state"] == "running"
    # Exactly one upstream job per task: the restarted worker submitted nothing twice.
    assert len(_jobs(sim_url, data_dir)) == 2
    httpx.delete(f"{sim_url}/sim/faults", headers=_sim_auth(data_dir), timeout=10)


def _api_dies_under_an_sse_client(
    api: httpx.Client, data_dir: Path, sim_url: str, stack: dict[str, Any]
) -> None:
    sse = SseClient(f"{stack['api_url']}/v1/events", stack["demo_token"])
    sse.start()
    until(lambda: sse.seqs, 30, "the SSE client has the history")
    httpx.post(
        f"{sim_url}/sim/faults", headers=_sim_auth(data_dir), json={"latency_scale": 60}, timeout=10
    )
    mid = _post(api, "Generate an image of a green frog")
    until(lambda: _status(api, mid, "waiting_generation"), 90, "parked on its job")
    _kill(data_dir, "api")
    # The job finishes while the api may be down: its events are written by the worker
    # (and the callback is retried or replaced by the compensating poll).
    until(lambda: _api_back(api) and _status(api, mid, "completed"), 120, "completed")
    everything = [e["seq"] for e in all_events(api)]
    until(lambda: sse.seqs[-1:] == everything[-1:], 30, "the client caught up")
    sse.done.set()
    assert sse.reconnects >= 1
    assert sse.seqs == everything, "an event was lost or repeated across the reconnect"
    assert _stack(data_dir)["restarts"]["api"] == 1
    httpx.delete(f"{sim_url}/sim/faults", headers=_sim_auth(data_dir), timeout=10)


def _api_back(api: httpx.Client) -> bool:
    try:
        return api.get("/healthz").status_code == 200
    except httpx.HTTPError:
        return False


def _temporal_dies_while_a_task_is_parked(api: httpx.Client, data_dir: Path, sim_url: str) -> None:
    httpx.post(
        f"{sim_url}/sim/faults",
        headers=_sim_auth(data_dir),
        json={"latency_scale": 100},
        timeout=10,
    )
    jobs_before = len(_jobs(sim_url, data_dir))
    mid = _post(api, "Generate an image of a yellow submarine")
    until(lambda: _status(api, mid, "waiting_generation"), 90, "parked on its job")
    _kill(data_dir, "temporal")
    until(lambda: _stack(data_dir)["restarts"]["temporal"] == 1, 30, "temporal restarted")
    done = until(lambda: _status(api, mid, "completed"), 180, "the parked task completes")
    assert done["artifacts"]
    assert len(_jobs(sim_url, data_dir)) == jobs_before + 1
    httpx.delete(f"{sim_url}/sim/faults", headers=_sim_auth(data_dir), timeout=10)

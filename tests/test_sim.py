"""Tests for the generation simulator, run over real HTTP (uvicorn in threads)."""

from __future__ import annotations

import asyncio
import io
import json
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from PIL import Image

from lomo.signing import refusal
from sim.app import SIGNATURE_HEADER, create_app
from tests.helpers import free_port

SECRET = "test-secret"
TOKEN = "test-sim-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SPEED = 0.02


class ServerThread:
    """A uvicorn server on a free port in a background thread."""

    def __init__(self, app: FastAPI) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class Receiver:
    """Records every callback (raw body + signature) it receives."""

    def __init__(self) -> None:
        self.calls: list[tuple[bytes, str]] = []
        app = FastAPI()

        @app.post("/cb")
        async def cb(request: Request) -> dict[str, bool]:
            self.calls.append((await request.body(), request.headers.get(SIGNATURE_HEADER, "")))
            return {"ok": True}

        self.server = ServerThread(app)

    @property
    def url(self) -> str:
        return f"{self.server.url}/cb"

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body, _ in self.calls]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    with r.server:
        yield r


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[ServerThread]:
    with ServerThread(create_app(tmp_path / "data", SECRET, speed=SPEED, token=TOKEN)) as s:
        yield s


async def _submit(client: httpx.AsyncClient, kind: str = "image", **extra: Any) -> str:
    body = {"kind": kind, "model": "m1", "params": extra.pop("params", {"prompt": "a cat"})}
    body.update(extra)
    resp = await client.post("/jobs", json=body)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["job_id"])


async def _wait_terminal(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        job = (await client.get(f"/jobs/{job_id}")).json()
        if job["status"] in ("succeeded", "failed"):
            return dict(job)
        await asyncio.sleep(0.02)
    raise AssertionError(f"job {job_id} never finished")


async def _wait_for(pred: Any, limit_s: float = 20) -> None:
    deadline = time.monotonic() + limit_s
    while not pred():
        assert time.monotonic() < deadline, "condition never met"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("kind", ["image", "video", "audio", "3d"])
async def test_each_kind_produces_real_file(sim: ServerThread, kind: str) -> None:
    params: dict[str, Any] = {"prompt": "sunset", "width": 320, "height": 200, "duration_s": 1}
    async with httpx.AsyncClient(base_url=sim.url, headers=AUTH) as client:
        job = await _wait_terminal(client, await _submit(client, kind, params=params))
        assert job["status"] == "succeeded"
        assert job["progress"] == 1.0
        assert job["result_url"].startswith(f"{sim.url}/files/{job['job_id']}.")
        resp = await client.get(job["result_url"])
    assert resp.status_code == 200
    data = resp.content
    assert data
    if kind == "image":
        assert Image.open(io.BytesIO(data)).size == (320, 200)
    elif kind == "video":
        assert data[4:8] == b"ftyp" or data[:4] == b"GIF8"
    elif kind == "audio":
        assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    else:
        # A binary glTF 2.0: its header's length is the file's, its first chunk JSON.
        magic, version, length = struct.unpack_from("<4sII", data)
        assert (magic, version, length) == (b"glTF", 2, len(data))
        assert data[16:20] == b"JSON"


async def test_validation_and_not_found(sim: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=sim.url, headers=AUTH) as client:
        bad = await client.post("/jobs", json={"kind": "smell", "model": "m", "params": {}})
        assert bad.status_code == 422
        assert set(bad.json()) == {"error", "detail"}
        missing = await client.post("/jobs", json={"kind": "image"})
        assert missing.status_code == 422
        nf = await client.get("/jobs/nope")
        assert nf.status_code == 404 and nf.json()["error"] == "not_found"


async def test_idempotency_key_dedup(sim: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=sim.url, headers=AUTH) as client:
        a = await _submit(client, idempotency_key="k-1")
        b = await _submit(client, idempotency_key="k-1")
        assert a == b
        jobs = (await client.get("/jobs")).json()["jobs"]
        assert [j["job_id"] for j in jobs] == [a]


async def test_callbacks_signed_and_ordered(sim: ServerThread, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=sim.url, headers=AUTH) as client:
        job_id = await _submit(client, callback_url=receiver.url, idempotency_key="ik")
        await _wait_terminal(client, job_id)
    await _wait_for(lambda: any(e["status"] == "succeeded" for e in receiver.events()))
    for body, sig in receiver.calls:  # the api's own check accepts what the sim signs
        assert refusal(SECRET, body, sig, max_age_seconds=300) is None
        assert refusal("another secret", body, sig, max_age_seconds=300) is not None
    events = receiver.events()
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(e["job_id"] == job_id and e["idempotency_key"] == "ik" for e in events)
    assert events[-1]["result_url"].endswith(".png")


async def test_duplicate_callbacks(sim: ServerThread, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=sim.url, headers=AUTH) as client:
        faults = (await client.post("/sim/faults", json={"duplicate_callbacks": 2})).json()
        assert faults["duplicate_callbacks"] == 2
        await _wait_terminal(client, await _submit(client, callback_url=receiver.url))
    await _wait_for(lambda: sum(e["status"] == "succeeded" for e in receiver.events()) == 3)
    counts: dict[str, int] = {}
    for e in receiver.events():
        counts[e["event_id"]] = counts.get(e["event_id"], 0) + 1
    assert len(counts) == 4  # three progress events + terminal
    assert set(counts.values()) == {3}


async def test_drop_callbacks(sim: ServerThread, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=sim.url, headers=AUTH) as client:
        await client.post("/sim/faults", json={"drop_callbacks": True})
        job = await _wait_terminal(client, await _submit(client, callback_url=receiver.url))
        assert job["status"] == "succeeded"
    await asyncio.sleep(0.3)
    assert receiver.calls == []


async def test_fail_rate_one_fails(sim: ServerThread, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=sim.url, headers=AUTH) as client:
        await client.post("/sim/faults", json={"fail_rate": 1})
        job = await _wait_terminal(client, await _submit(client, callback_url=receiver.url))
        assert job["status"] == "failed" and job["error"]
        assert "result_url" not in job
        reset = (await client.delete("/sim/faults")).json()
        assert reset["fail_rate"] == 0 and (await client.get("/sim/faults")).json() == reset
    await _wait_for(lambda: any(e["status"] == "failed" for e in receiver.events()))


async def test_submit_timeout_after_create(sim: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=sim.url, headers=AUTH) as client:
        await client.post(
            "/sim/faults",
            json={"submit_timeout_after_create": True, "submit_timeout_seconds": 1.5},
        )
        with pytest.raises(httpx.TimeoutException):
            await client.post(
                "/jobs",
                json={"kind": "audio", "model": "m", "params": {}, "idempotency_key": "t1"},
                timeout=0.5,
            )
        jobs = (await client.get("/jobs")).json()["jobs"]
        assert len(jobs) == 1
        # A retry with the same key answers promptly with the existing job.
        assert await _submit(client, "audio", idempotency_key="t1") == jobs[0]["job_id"]


async def test_out_of_order(sim: ServerThread, receiver: Receiver) -> None:
    async with httpx.AsyncClient(base_url=sim.url, headers=AUTH) as client:
        await client.post("/sim/faults", json={"out_of_order": True})
        await _wait_terminal(client, await _submit(client, callback_url=receiver.url))
    await _wait_for(lambda: len(receiver.events()) == 4)
    events = receiver.events()
    terminal_idx = next(i for i, e in enumerate(events) if e["status"] == "succeeded")
    after = events[terminal_idx + 1 :]
    assert after and all(e["seq"] < events[terminal_idx]["seq"] for e in after)


async def test_restart_persistence(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # speed=1 so the job is still in flight when the first server stops.
    with ServerThread(create_app(data, SECRET, speed=1.0, token=TOKEN)) as first:
        async with httpx.AsyncClient(base_url=first.url, headers=AUTH) as client:
            job_id = await _submit(client, "3d")
    saved = json.loads((data / "jobs.json").read_text())["jobs"]
    assert [j["job_id"] for j in saved] == [job_id]
    assert saved[0]["status"] not in ("succeeded", "failed")
    with ServerThread(create_app(data, SECRET, speed=SPEED, token=TOKEN)) as second:
        async with httpx.AsyncClient(base_url=second.url, headers=AUTH) as client:
            jobs = (await client.get("/jobs")).json()["jobs"]
            assert [j["job_id"] for j in jobs] == [job_id]
            job = await _wait_terminal(client, job_id)
            assert job["status"] == "succeeded"
            assert job["result_url"].startswith(second.url)
            assert (await client.get(job["result_url"])).status_code == 200


async def test_operator_endpoints_need_the_sim_token(sim: ServerThread) -> None:
    """Fault injection and the job listing refuse a call without the simulator's own token
    (or with another); the generation endpoints the worker uses need none."""
    async with httpx.AsyncClient(base_url=sim.url) as anon:
        for method, path in [("POST", "/sim/faults"), ("GET", "/sim/faults"), ("GET", "/jobs")]:
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                r = await anon.request(method, path, json={"fail_rate": 1}, headers=headers)
                assert r.status_code == 401, (method, path, r.text)
                assert r.json()["error"] == "unauthorized"
        assert (await anon.delete("/sim/faults")).status_code == 401
        job_id = await _submit(anon)  # the worker's calls: no token
        assert (await anon.get(f"/jobs/{job_id}")).status_code == 200
    async with httpx.AsyncClient(base_url=sim.url, headers=AUTH) as op:
        faults = await op.post("/sim/faults", json={"fail_rate": 1})
        assert faults.status_code == 200 and faults.json()["fail_rate"] == 1
        assert [j["job_id"] for j in (await op.get("/jobs")).json()["jobs"]] == [job_id]


async def test_a_foreign_host_name_is_refused(sim: ServerThread) -> None:
    """A page whose DNS name was rebound to 127.0.0.1 sends its own Host: refused with 400,
    token or not; the loopback names, with or without a port, are served."""
    async with httpx.AsyncClient(base_url=sim.url, headers=AUTH) as c:
        for host in ("evil.example", f"evil.example:{sim.port}", "127.0.0.1.evil.example"):
            r = await c.get("/sim/faults", headers={"Host": host})
            assert r.status_code == 400 and r.json()["error"] == "invalid_host", host
            assert (await c.post("/jobs", headers={"Host": host}, json={})).status_code == 400
        for host in ("127.0.0.1", f"127.0.0.1:{sim.port}", f"localhost:{sim.port}", "[::1]:1"):
            assert (await c.get("/sim/faults", headers={"Host": host})).status_code == 200

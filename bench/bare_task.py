"""The bare side of bench/task_cost.py: one picture task with no Lomo code.

The same externally visible moves as a Lomo picture task, written the way a Temporal user
would write them with the SDK's defaults:

- a front process (`bare_task.py front`) takes `POST /messages` and starts the workflow
  by signal-with-start, and takes the simulator's signed callbacks at
  `POST /callbacks/{workflow_id}`: it checks the signature of each, and signals the
  workflow with the terminal one (progress callbacks are checked and acknowledged);
- a worker process (`bare_task.py worker`) runs `BarePicture`: a "route" activity and a
  "model step" activity, each writing one row to SQLite; an activity that orders the
  picture from the simulator over HTTP (the same `POST /jobs` body Lomo sends); the wait
  for the callback's signal; an activity that downloads the picture, writes it to disk and
  records it in one row; then the workflow ends.

Both read their settings from the environment (BARE_TEMPORAL, BARE_DB, BARE_SIM_URL,
BARE_FRONT_URL, BARE_SECRET, BARE_BLOBS, BARE_PORT) so the bench can start them as their
own processes and read each one's CPU from /proc.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    import aiosqlite
    import httpx

TASK_QUEUE = "bare-picture"
TERMINAL = ("succeeded", "failed")
ROWS_DDL = (
    "CREATE TABLE IF NOT EXISTS bare_rows (id TEXT PRIMARY KEY, kind TEXT NOT NULL,"
    " body TEXT NOT NULL, at REAL NOT NULL)"
)


@dataclass
class Step:
    key: str  # the workflow's id; each row is keyed from it, so a retry writes nothing more
    text: str


@dataclass
class Order:
    key: str
    prompt: str


@dataclass
class Result:
    key: str
    job_id: str
    status: str
    result_url: str | None


@workflow.defn(name="BarePicture")
class BarePicture:
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.outcome: dict[str, Any] | None = None

    @workflow.signal
    def message(self, text: str) -> None:
        self.messages.append(text)

    @workflow.signal
    def callback(self, event: dict[str, Any]) -> None:
        self.outcome = event

    @workflow.run
    async def run(self) -> str:
        opts: dict[str, Any] = {"start_to_close_timeout": timedelta(minutes=1)}
        await workflow.wait_condition(lambda: bool(self.messages))
        key, text = workflow.info().workflow_id, self.messages[0]
        await workflow.execute_activity(bare_route, Step(key, text), **opts)
        await workflow.execute_activity(bare_model_step, Step(key, text), **opts)
        job_id = await workflow.execute_activity(bare_order, Order(key, text), **opts)
        await workflow.wait_condition(lambda: self.outcome is not None)
        done = self.outcome or {}
        status, url = str(done.get("status")), done.get("result_url")
        await workflow.execute_activity(bare_store, Result(key, job_id, status, url), **opts)
        return status


async def _write(row_id: str, kind: str, body: dict[str, Any]) -> None:
    # One connection per write, committed: what a small app without a pool does.
    async with aiosqlite.connect(os.environ["BARE_DB"], timeout=30) as db:
        await db.execute(
            "INSERT OR IGNORE INTO bare_rows (id, kind, body, at) VALUES (?, ?, ?, ?)",
            (row_id, kind, json.dumps(body), time.time()),
        )
        await db.commit()


@activity.defn(name="bare_route")
async def bare_route(step: Step) -> str:
    await _write(f"{step.key}:route", "route", {"decision": "new", "text": step.text})
    return "new"


@activity.defn(name="bare_model_step")
async def bare_model_step(step: Step) -> str:
    await _write(f"{step.key}:step", "step", {"tool": "generate_image", "prompt": step.text})
    return "generate_image"


_http: httpx.AsyncClient | None = None


def _client() -> httpx.AsyncClient:
    global _http  # one pooled client per worker process, as any service keeps
    if _http is None:
        _http = httpx.AsyncClient(timeout=30)
    return _http


@activity.defn(name="bare_order")
async def bare_order(order: Order) -> str:
    body = {
        "kind": "image",
        "model": "sim-image",
        "params": {"prompt": order.prompt},
        "callback_url": f"{os.environ['BARE_FRONT_URL']}/callbacks/{order.key}",
        "idempotency_key": order.key.replace(":", "_"),
    }
    r = await _client().post(f"{os.environ['BARE_SIM_URL']}/jobs", json=body)
    r.raise_for_status()
    job_id = str(r.json()["job_id"])
    await _write(f"{order.key}:order", "order", {"job_id": job_id})
    return job_id


@activity.defn(name="bare_store")
async def bare_store(result: Result) -> None:
    blob = Path(os.environ["BARE_BLOBS"]) / f"{result.job_id}.png"
    if result.status == "succeeded" and result.result_url:
        r = await _client().get(result.result_url)
        r.raise_for_status()
        await asyncio.to_thread(blob.write_bytes, r.content)
    body = {"job_id": result.job_id, "status": result.status, "blob": str(blob)}
    await _write(f"{result.key}:result", "result", body)


def signature_ok(secret: str, body: bytes, header: str, max_age: float = 300.0) -> bool:
    """The simulator's callback signature: `t=<unix s>,v1=<hex HMAC-SHA256 of "<t>." + body>`,
    fresh within `max_age` seconds."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    stamp, mac = parts.get("t", ""), parts.get("v1", "")
    if not stamp.isdigit() or not mac:
        return False
    want = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(mac.encode(), want.encode()) and (
        abs(time.time() - int(stamp)) <= max_age
    )


def front_app() -> Any:
    """The front: a message starts (or signals) its workflow, a callback signals it."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
    from temporalio.client import Client

    secret = os.environ["BARE_SECRET"]
    clients: list[Client] = []

    async def client() -> Client:
        if not clients:
            clients.append(await Client.connect(os.environ["BARE_TEMPORAL"]))
        return clients[0]

    async def message(request: Request) -> Response:
        got = await request.json()
        wf_id = f"pic:{got['key']}"
        await (await client()).start_workflow(
            "BarePicture",
            id=wf_id,
            task_queue=TASK_QUEUE,
            start_signal="message",
            start_signal_args=[got["text"]],
        )
        return JSONResponse({"workflow_id": wf_id}, status_code=202)

    async def callback(request: Request) -> Response:
        body = await request.body()
        if not signature_ok(secret, body, request.headers.get("x-lomo-signature", "")):
            return Response(status_code=401)
        event = json.loads(body)
        if event.get("status") in TERMINAL:
            handle = (await client()).get_workflow_handle(request.path_params["wf_id"])
            await handle.signal("callback", event)
        return Response(status_code=204)

    return Starlette(
        routes=[
            Route("/messages", message, methods=["POST"]),
            Route("/callbacks/{wf_id}", callback, methods=["POST"]),
        ]
    )


async def run_worker() -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    async with aiosqlite.connect(os.environ["BARE_DB"]) as db:
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute(ROWS_DDL)
        await db.commit()
    client = await Client.connect(os.environ["BARE_TEMPORAL"])
    worker = Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=[BarePicture],
        activities=[bare_route, bare_model_step, bare_order, bare_store],
    )
    await worker.run()


if __name__ == "__main__":
    if sys.argv[1:] == ["worker"]:
        asyncio.run(run_worker())
    elif sys.argv[1:] == ["front"]:
        import uvicorn

        port = int(os.environ["BARE_PORT"])
        uvicorn.run(front_app(), host="127.0.0.1", port=port, log_level="warning")
    else:
        raise SystemExit("usage: bare_task.py worker|front")

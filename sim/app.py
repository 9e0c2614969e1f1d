"""FastAPI app simulating an external generation vendor.

Jobs are persisted to ``data_dir/jobs.json`` (atomic temp-file + ``os.replace``) and result
files live in ``data_dir/files/``. On restart, jobs that were not terminal are *resumed from
scratch*: they go back to ``queued`` with progress 0 and run their whole lifecycle again
(simplest behaviour that never loses a job). Faults are in-memory only and reset on restart.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import random
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, Field

from lomo.hosts import TrustedHosts
from lomo.settings import LOOPBACK_NAMES
from lomo.signing import SIGNATURE_HEADER, sign
from sim import render
from sim.payments import Payments, payments_router

logger = logging.getLogger(__name__)

Kind = Literal["image", "video", "audio", "3d"]
TERMINAL = ("succeeded", "failed", "cancelled")
# How a completion races a cancel (the `cancel_race` fault): the job ends just before the
# cancel is handled (the cancel then finds it done), or its completion event was already
# on its way and is delivered after the cancel's answer.
CancelRace = Literal["", "complete_before", "complete_after"]
BASE_LATENCY_S: dict[str, float] = {"image": 2.0, "video": 5.0, "audio": 3.0, "3d": 4.0}
PROGRESS_STEPS = (0.25, 0.5, 0.75)


class JobRequest(BaseModel):
    kind: Kind
    model: str
    params: dict[str, Any]
    callback_url: str | None = None
    idempotency_key: str | None = None


class Faults(BaseModel):
    duplicate_callbacks: int = Field(default=0, ge=0, le=100)
    out_of_order: bool = False
    drop_callbacks: bool = False
    submit_timeout_after_create: bool = False
    submit_timeout_seconds: float = Field(default=10.0, ge=0)
    fail_rate: float = Field(default=0.0, ge=0, le=1)
    latency_scale: float = Field(default=1.0, ge=0)
    # Serve results under this Content-Type instead of the file's own (a lying upstream).
    result_content_type: str | None = None
    # The next N image jobs ignore their prompt: a revision comes back as the picture it
    # revised (a model that missed the brief).
    ignore_brief_jobs: int = Field(default=0, ge=0, le=100)
    # Payments stay pending until `POST /payments/{id}/complete` (sim/payments.py).
    hold_payments: bool = False
    cancel_race: CancelRace = ""


class FaultsUpdate(BaseModel):
    """Partial update: only fields present in the body change."""

    duplicate_callbacks: int | None = Field(default=None, ge=0, le=100)
    out_of_order: bool | None = None
    drop_callbacks: bool | None = None
    submit_timeout_after_create: bool | None = None
    submit_timeout_seconds: float | None = Field(default=None, ge=0)
    fail_rate: float | None = Field(default=None, ge=0, le=1)
    latency_scale: float | None = Field(default=None, ge=0)
    result_content_type: str | None = None
    ignore_brief_jobs: int | None = Field(default=None, ge=0, le=100)
    hold_payments: bool | None = None
    cancel_race: CancelRace | None = None


def _error(status: int, error: str, detail: Any) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": error, "detail": detail})


def _public(job: dict[str, Any], base_url: str) -> dict[str, Any]:
    out = {k: job[k] for k in ("job_id", "kind", "status", "progress")}
    if job.get("result_file"):
        # Built from the *current* request so URLs stay valid if the sim moved host/port.
        out["result_url"] = f"{base_url.rstrip('/')}/files/{job['result_file']}"
    if job.get("error") is not None:
        out["error"] = job["error"]
    return out


class Simulator:
    """All mutable state; methods run on the app's event loop."""

    def __init__(self, data_dir: Path, callback_secret: str, speed: float) -> None:
        self.data_dir = data_dir
        self.files_dir = data_dir / "files"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        self.jobs_path = data_dir / "jobs.json"
        self.secret = callback_secret
        self.speed = speed
        self.faults = Faults()
        self.jobs: dict[str, dict[str, Any]] = {}
        self.by_key: dict[str, str] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.running: dict[str, asyncio.Task[None]] = {}
        # Progress events the out_of_order fault holds back, per job.
        self.held: dict[str, list[dict[str, Any]]] = {}
        self.client: httpx.AsyncClient | None = None
        self._load()

    # -- persistence -------------------------------------------------------------------
    def _load(self) -> None:
        if not self.jobs_path.exists():
            return
        try:
            raw = json.loads(self.jobs_path.read_text())
        except (OSError, json.JSONDecodeError):
            logger.exception("could not read %s; starting empty", self.jobs_path)
            return
        for job in raw.get("jobs", []):
            self.jobs[job["job_id"]] = job
            if job.get("idempotency_key"):
                self.by_key[job["idempotency_key"]] = job["job_id"]

    def save(self) -> None:
        # Synchronous on purpose: no await inside, so concurrent tasks never interleave writes.
        payload = json.dumps({"jobs": list(self.jobs.values())}, indent=1)
        fd, tmp = tempfile.mkstemp(dir=self.data_dir, prefix=".jobs.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(payload)
            os.replace(tmp, self.jobs_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # -- lifecycle ---------------------------------------------------------------------
    def http(self) -> httpx.AsyncClient:
        # Lazily created so the app also works under ASGITransport without lifespan.
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=5.0)
        return self.client

    def start(self, job_id: str) -> None:
        task = asyncio.create_task(self._run(job_id), name=f"sim-job-{job_id}")
        self.tasks.add(task)
        self.running[job_id] = task
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(lambda _: self.running.pop(job_id, None))

    def resume_unfinished(self) -> None:
        for job in self.jobs.values():
            if job["status"] not in TERMINAL:
                job.update(
                    status="queued", progress=0.0, result_url=None, result_file=None, error=None
                )
                self.start(job["job_id"])
        self.save()

    async def shutdown(self) -> None:
        # Cancelled jobs stay non-terminal on disk, so the next start resumes them.
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.client is not None:
            await self.client.aclose()
            self.client = None

    def create(self, req: JobRequest, base_url: str) -> tuple[str, bool]:
        if req.idempotency_key and req.idempotency_key in self.by_key:
            return self.by_key[req.idempotency_key], False
        job_id = uuid.uuid4().hex
        self.jobs[job_id] = {
            "job_id": job_id,
            "kind": req.kind,
            "model": req.model,
            "params": req.params,
            "callback_url": req.callback_url,
            "idempotency_key": req.idempotency_key,
            "status": "queued",
            "progress": 0.0,
            "result_url": None,
            "result_file": None,
            "error": None,
            "seq": 0,
            "base_url": base_url.rstrip("/"),
            "created_at": time.time(),
        }
        if req.idempotency_key:
            self.by_key[req.idempotency_key] = job_id
        self.save()
        self.start(job_id)
        return job_id, True

    async def _run(self, job_id: str) -> None:
        job = self.jobs[job_id]
        held = self.held.setdefault(job_id, [])  # delayed by the out_of_order fault
        step = BASE_LATENCY_S[job["kind"]] * self.speed * self.faults.latency_scale / 4
        await asyncio.sleep(step)
        for p in PROGRESS_STEPS:
            self._update(job, status="running", progress=p)
            event = self._event(job)
            if self.faults.out_of_order:
                held.append(event)
            else:
                await self._deliver(job, event)
            if p != PROGRESS_STEPS[-1]:
                await asyncio.sleep(step)
        await asyncio.sleep(step)
        await self._finish(job)

    async def _finish(self, job: dict[str, Any]) -> None:
        """The job's end: its result (or failure), then its terminal event, then any
        progress events held back, shuffled."""
        job_id = job["job_id"]
        # Seeded per job id so a given job's fate is reproducible.
        if random.Random(job_id).random() < self.faults.fail_rate:
            self._update(job, status="failed", error="simulated failure (fail_rate)")
        else:
            try:
                params = job["params"]
                if job["kind"] == "image" and self.faults.ignore_brief_jobs > 0:
                    self.faults.ignore_brief_jobs -= 1
                    params = {**params, "prompt": ""}
                path = await asyncio.to_thread(
                    render.render, job["kind"], params, self.files_dir, job_id
                )
                if job["status"] == "cancelled":
                    return  # cancelled while it rendered: the picture is not delivered
                url = f"{job['base_url']}/files/{path.name}"
                self._update(
                    job, status="succeeded", progress=1.0, result_url=url, result_file=path.name
                )
            except Exception as exc:
                logger.exception("render failed for job %s", job_id)
                self._update(job, status="failed", error=f"render error: {exc}")
        await self._deliver(job, self._event(job))
        await self._deliver_held(job)

    async def _deliver_held(self, job: dict[str, Any]) -> None:
        held = self.held.pop(job["job_id"], [])
        # Stale progress arrives after the terminal event, in shuffled order.
        random.Random(f"{job['job_id']}-order").shuffle(held)
        for event in held:
            await self._deliver(job, event)

    async def cancel(self, job_id: str) -> dict[str, Any] | None:
        """Stop a job: one not started yet (queued, progress 0) costs nothing, one started
        the catalogue's partial price of the progress it reached (the platform's catalogue
        turns the progress answered here into cents). A finished job stays as it ended:
        the answer is its state. Asked again, the same answer."""
        job = self.jobs.get(job_id)
        if job is None:
            return None
        if job["status"] in TERMINAL:
            return job
        task = self.running.pop(job_id, None)
        if task is not None:
            task.cancel()
        if self.faults.cancel_race == "complete_before":
            await self._finish(job)  # done just before the cancel is handled
            return job
        self._update(job, status="cancelled")
        event = self._event(job)
        late: dict[str, Any] | None = None
        if self.faults.cancel_race == "complete_after":
            # Its completion was already on its way: delivered after the cancel's answer.
            late = {**event, "status": "succeeded", "progress": 1.0, "seq": event["seq"] + 1}
            late["result_url"] = f"{job['base_url']}/files/{job_id}.png"
        self._spawn(self._after_cancel(job, event, late), f"sim-cancel-{job_id}")
        return job

    async def _after_cancel(
        self, job: dict[str, Any], event: dict[str, Any], late: dict[str, Any] | None
    ) -> None:
        await self._deliver(job, event)
        await self._deliver_held(job)
        if late is not None:
            await self._deliver(job, late)

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _update(self, job: dict[str, Any], **changes: Any) -> None:
        job.update(changes)
        job["seq"] += 1
        self.save()

    def _event(self, job: dict[str, Any]) -> dict[str, Any]:
        event: dict[str, Any] = {
            "event_id": uuid.uuid4().hex,
            "job_id": job["job_id"],
            "status": job["status"],
            "progress": job["progress"],
            "seq": job["seq"],
        }
        for k in ("result_url", "error", "idempotency_key"):
            if job.get(k) is not None:
                event[k] = job[k]
        return event

    async def _deliver(self, job: dict[str, Any], event: dict[str, Any]) -> None:
        url = job.get("callback_url")
        if not url or self.faults.drop_callbacks:
            return
        body = json.dumps(event).encode()
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(self.secret, body)}
        for _ in range(1 + self.faults.duplicate_callbacks):
            try:
                resp = await self.http().post(url, content=body, headers=headers)
                if resp.status_code >= 400:
                    logger.warning("callback %s -> HTTP %s", url, resp.status_code)
            except httpx.HTTPError as exc:
                logger.warning("callback delivery to %s failed: %r", url, exc)


def _bearer(token: str) -> Any:
    """A dependency refusing a request without ``Authorization: Bearer <token>``: fault
    injection, the job listing and lookup, and cancelling a job take the account's key
    (one person's cancel must not stop anyone else's job by guessing its id)."""

    def check(request: Request) -> None:
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "the simulator token is missing or wrong")

    return Depends(check)


def _install_errors(app: FastAPI) -> None:
    """Errors in the vendor's shape: `{"error", "detail"}`."""

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, "unauthorized", exc.detail)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Flatten pydantic errors into one readable string, per the vendor error shape.
        detail = "; ".join(
            f"{'.'.join(str(x) for x in e.get('loc', ()))}: {e.get('msg', '')}"
            for e in exc.errors()
        )
        return _error(422, "validation_error", detail)


def _jobs_router(sim: Simulator, operator: list[Any]) -> APIRouter:
    """Submitting and reading jobs, and their result files."""
    router = APIRouter()

    @router.post("/jobs")
    async def submit(req: JobRequest, request: Request) -> dict[str, str]:
        job_id, created = sim.create(req, str(request.base_url))
        if created and sim.faults.submit_timeout_after_create:
            # The job exists already; the client just never hears back in time.
            await asyncio.sleep(sim.faults.submit_timeout_seconds)
        return {"job_id": job_id}

    @router.get("/jobs", dependencies=operator)
    async def list_jobs(
        request: Request, idempotency_key: str | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        """All jobs, or the one a key created: a client whose submit's answer was lost
        finds its job again here instead of creating another."""
        base = str(request.base_url)
        jobs = sim.jobs.values()
        if idempotency_key is not None:
            found = sim.by_key.get(idempotency_key)
            jobs = [sim.jobs[found]] if found else []  # type: ignore[assignment]
        return {"jobs": [_public(j, base) for j in jobs]}

    @router.post("/jobs/{job_id}/cancel", response_model=None, dependencies=operator)
    async def cancel_job(job_id: str, request: Request) -> dict[str, Any] | JSONResponse:
        job = await sim.cancel(job_id)
        if job is None:
            return _error(404, "not_found", f"no job {job_id}")
        return {**_public(job, str(request.base_url)), "seq": job["seq"]}

    @router.get("/jobs/{job_id}", response_model=None)
    async def get_job(job_id: str, request: Request) -> dict[str, Any] | JSONResponse:
        job = sim.jobs.get(job_id)
        if job is None:
            return _error(404, "not_found", f"no job {job_id}")
        return _public(job, str(request.base_url))

    @router.get("/files/{name}", response_model=None)
    async def get_file(name: str) -> FileResponse | JSONResponse:
        path = sim.files_dir / name
        if Path(name).name != name or not path.is_file():
            return _error(404, "not_found", f"no file {name}")
        return FileResponse(path, media_type=sim.faults.result_content_type)

    return router


def _faults_router(sim: Simulator, operator: list[Any]) -> APIRouter:
    """The operator's fault injection: read, change in part, reset."""
    router = APIRouter(prefix="/sim/faults", dependencies=operator)

    @router.get("")
    async def get_faults() -> Faults:
        return sim.faults

    @router.post("")
    async def set_faults(update: FaultsUpdate) -> Faults:
        changes = update.model_dump(exclude_unset=True, exclude_none=True)
        sim.faults = sim.faults.model_copy(update=changes)
        return sim.faults

    @router.delete("")
    async def reset_faults() -> Faults:
        sim.faults = Faults()
        return sim.faults

    return router


def create_app(
    data_dir: Path,
    callback_secret: str,
    speed: float = 1.0,
    *,
    token: str,
    allowed_hosts: Sequence[str] = LOOPBACK_NAMES,
) -> FastAPI:
    """Build the simulator app. ``speed`` multiplies every latency (0.02 = 50x faster);
    ``token`` guards the fault and listing endpoints; ``allowed_hosts`` the Host names."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    sim = Simulator(data_dir, callback_secret, speed)
    payments = Payments(sim)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        sim.resume_unfinished()
        payments.resume_unfinished()
        yield
        await sim.shutdown()

    app = FastAPI(title="Lomo generation simulator", lifespan=lifespan)
    app.state.sim = sim
    app.add_middleware(TrustedHosts, allowed=allowed_hosts)
    operator = [_bearer(token)]

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """Unauthenticated, for probes: a process that answers is serving."""
        return {"status": "ok", "service": "lomo-sim"}

    app.include_router(payments_router(payments, operator))
    _install_errors(app)
    app.include_router(_jobs_router(sim, operator))
    app.include_router(_faults_router(sim, operator))
    return app

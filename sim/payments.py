"""The simulator as a payment provider: checkouts, their completion, signed webhooks.

`POST /payments` creates a payment (idempotent on `idempotency_key`), which is pending
until it completes: by itself after a short delay, or, while the `hold_payments` fault is
set, when the operator calls `POST /payments/{id}/complete` (as the person paying at the
provider would). Each state change is sent to the payment's `webhook_url`, signed like the
generation callbacks (lomo/signing.py); `complete` on a finished payment sends its last
report again (a provider's redelivery). Payments persist in ``payments.json``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from lomo.signing import SIGNATURE_HEADER, sign

if TYPE_CHECKING:
    from sim.app import Simulator

logger = logging.getLogger(__name__)
PAYMENT_LATENCY_S = 1.0
DONE = ("succeeded", "failed")


class PaymentRequest(BaseModel):
    amount_cents: int = Field(ge=1, le=10_000_000)
    currency: str = Field(default="EUR", min_length=3, max_length=3)
    reference: str = Field(min_length=1, max_length=80)
    webhook_url: str | None = Field(default=None, max_length=500)
    idempotency_key: str | None = Field(default=None, max_length=160)


class Completion(BaseModel):
    status: Literal["succeeded", "failed"] = "succeeded"


class Payments:
    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.path = sim.data_dir / "payments.json"
        self.items: dict[str, dict[str, Any]] = {}
        self.by_key: dict[str, str] = {}
        if self.path.exists():
            try:
                for p in json.loads(self.path.read_text()).get("payments", []):
                    self.items[p["payment_id"]] = p
                    if p.get("idempotency_key"):
                        self.by_key[p["idempotency_key"]] = p["payment_id"]
            except (OSError, json.JSONDecodeError):
                logger.exception("could not read %s; starting empty", self.path)

    def save(self) -> None:
        payload = json.dumps({"payments": list(self.items.values())}, indent=1)
        fd, tmp = tempfile.mkstemp(dir=self.sim.data_dir, prefix=".payments.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(payload)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def create(self, req: PaymentRequest, base_url: str) -> tuple[dict[str, Any], bool]:
        if req.idempotency_key and req.idempotency_key in self.by_key:
            return self.items[self.by_key[req.idempotency_key]], False
        pid = uuid.uuid4().hex
        p = {
            "payment_id": pid,
            "reference": req.reference,
            "amount_cents": req.amount_cents,
            "currency": req.currency,
            "webhook_url": req.webhook_url,
            "idempotency_key": req.idempotency_key,
            "status": "pending",
            "seq": 0,
            "checkout_url": f"{base_url.rstrip('/')}/checkout/{pid}",
            "created_at": time.time(),
        }
        self.items[pid] = p
        if req.idempotency_key:
            self.by_key[req.idempotency_key] = pid
        self.save()
        if not self.sim.faults.hold_payments:
            self._later(pid)
        return p, True

    def _later(self, pid: str) -> None:
        async def run() -> None:
            await asyncio.sleep(PAYMENT_LATENCY_S * self.sim.speed)
            await self.complete(pid, "succeeded")

        task = asyncio.create_task(run(), name=f"sim-payment-{pid}")
        self.sim.tasks.add(task)
        task.add_done_callback(self.sim.tasks.discard)

    async def complete(self, pid: str, status: str) -> dict[str, Any]:
        """Finish a pending payment and report it; a finished one is reported again."""
        p = self.items[pid]
        if p["status"] not in DONE:
            p["status"] = status
            p["seq"] += 1
            self.save()
        await self.deliver(p)
        return p

    async def deliver(self, p: dict[str, Any]) -> None:
        url = p.get("webhook_url")
        if not url or self.sim.faults.drop_callbacks:
            return
        event = {"event_id": uuid.uuid4().hex, **public(p)}
        body = json.dumps(event).encode()
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(self.sim.secret, body),
        }
        for _ in range(1 + self.sim.faults.duplicate_callbacks):
            try:
                resp = await self.sim.http().post(url, content=body, headers=headers)
                if resp.status_code >= 400:
                    logger.warning("payment webhook %s -> HTTP %s", url, resp.status_code)
            except httpx.HTTPError as exc:
                logger.warning("payment webhook to %s failed: %r", url, exc)

    def resume_unfinished(self) -> None:
        if self.sim.faults.hold_payments:
            return
        for pid, p in self.items.items():
            if p["status"] not in DONE:
                self._later(pid)


def public(p: dict[str, Any]) -> dict[str, Any]:
    keys = ("payment_id", "reference", "amount_cents", "currency", "status", "seq")
    return {k: p[k] for k in keys} | {"checkout_url": p["checkout_url"]}


def _missing(pid: str) -> JSONResponse:
    return JSONResponse(status_code=404, content={"error": "not_found", "detail": f"no {pid}"})


def payments_router(payments: Payments, operator: list[Any]) -> APIRouter:
    router = APIRouter()

    @router.post("/payments")
    async def create(req: PaymentRequest, request: Request) -> dict[str, Any]:
        p, _ = payments.create(req, str(request.base_url))
        return public(p)

    @router.get("/payments/{pid}", response_model=None)
    async def read(pid: str) -> dict[str, Any] | JSONResponse:
        p = payments.items.get(pid)
        return _missing(pid) if p is None else public(p)

    @router.post("/payments/{pid}/complete", dependencies=operator, response_model=None)
    async def complete(pid: str, body: Completion) -> dict[str, Any] | JSONResponse:
        if pid not in payments.items:
            return _missing(pid)
        return public(await payments.complete(pid, body.status))

    @router.get("/payments", dependencies=operator)
    async def listing() -> dict[str, list[dict[str, Any]]]:
        return {"payments": [public(p) for p in payments.items.values()]}

    return router

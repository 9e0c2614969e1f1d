"""Top-ups on the real stack (api and the simulator as payment provider over HTTP, a worker,
Temporal): a payment is booked as one deposit whatever its webhooks do (duplicates, late
lower states, replays), a forged or stale signature changes nothing, only the person's app
adds credit, and a task parked for credit continues by itself once the deposit lands,
also when its wake-up is lost (the api gone after the deposit)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.client import Client

from lomo.db.models import Card, GenerationOrder, Task
from lomo.signing import SIGNATURE_HEADER, sign
from money.ledger import ledger_problems
from money.models import LedgerEntry, Payment
from money.payments import Report, apply_report
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import start_task, text
from tests.stack import Stack, running_stack
from tests.test_channels import _api_token
from tests.test_money_e2e import _tools


async def _entries(st: Stack) -> list[tuple[str, int, str]]:
    async with st.db.session() as s:
        rows = await s.execute(
            select(LedgerEntry.kind, LedgerEntry.amount_cents, LedgerEntry.key)
            .where(LedgerEntry.user_id == st.user_id)
            .order_by(LedgerEntry.id)
        )
        assert await ledger_problems(s, st.user_id) == []
        return [(k, a, key) for k, a, key in rows]


async def _webhook(st: Stack, event: dict[str, Any], at: float | None = None) -> Any:
    body = json.dumps(event).encode()
    secret = st.settings.callback_secret.get_secret_value()
    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body, at)}
    return await st.api.post("/v1/payments/webhooks", content=body, headers=headers)


async def _top_up(st: Stack, amount: int, **extra: Any) -> dict[str, Any]:
    r = await st.api.post(
        "/v1/budget/top-ups", json={"amount_cents": amount, **extra}, headers=st.auth
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


async def _succeeded(st: Stack, pid: str) -> dict[str, Any] | None:
    t = (await st.api.get(f"/v1/budget/top-ups/{pid}", headers=st.auth)).json()
    return t if t["status"] == "succeeded" else None


async def test_a_top_up_is_one_deposit_whatever_the_webhooks_do(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        await st.sim.post("/sim/faults", json={"duplicate_callbacks": 3})
        first = await _top_up(st, 500, request_id="r1")
        assert first["status"] == "pending" and first["amount_cents"] == 500
        again = await _top_up(st, 500, request_id="r1")  # a retried request: the same one
        assert again["payment_id"] == first["payment_id"]
        pid = first["payment_id"]
        done = await eventually(lambda: _succeeded(st, pid), within=30)
        assert done["balance"] == 2500 and done["completed_at"]
        # The provider delivers the final report again (and 3 duplicates each time).
        async with st.db.session() as s:
            provider_id = (await s.get(Payment, pid)).provider_id  # type: ignore[union-attr]
        r = await st.sim.post(f"/payments/{provider_id}/complete", json={"status": "succeeded"})
        assert r.status_code == 200
        assert (await _entries(st)) == [
            ("deposit", 2000, "initial-credit"),
            ("deposit", 500, f"payment:{pid}"),
        ]
        assert len((await st.sim.get("/payments")).json()["payments"]) == 1
        budget = (await st.api.get("/v1/budget", headers=st.auth)).json()
        assert (budget["balance"], budget["deposits"]) == (2500, 2500)


async def test_webhooks_are_signed_ordered_and_the_persons_own(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        await st.sim.post("/sim/faults", json={"hold_payments": True})
        _, api_token = await _api_token(st)
        r = await st.api.post("/v1/budget/top-ups", json={"amount_cents": 500}, headers=api_token)
        assert r.status_code == 403
        for bad in (0, 10**9):
            r = await st.api.post("/v1/budget/top-ups", json={"amount_cents": bad}, headers=st.auth)
            assert r.status_code in (400, 422)
        top = await _top_up(st, 700)
        pid = top["payment_id"]
        r = await st.api.get(f"/v1/budget/top-ups/{pid}", headers=api_token)
        assert r.status_code == 403
        async with st.db.session() as s:
            provider_id = (await s.get(Payment, pid)).provider_id  # type: ignore[union-attr]
        paid = {
            "event_id": "e1",
            "payment_id": provider_id,
            "reference": pid,
            "status": "succeeded",
            "amount_cents": 700,
            "currency": "EUR",
        }
        body = json.dumps(paid).encode()
        forged = {SIGNATURE_HEADER: sign("not-the-secret", body)}
        r = await st.api.post("/v1/payments/webhooks", content=body, headers=forged)
        assert r.status_code == 401
        assert (await _webhook(st, paid, at=time.time() - 3600)).status_code == 401  # stale
        r = await st.api.post("/v1/payments/webhooks", content=body)  # unsigned
        assert r.status_code == 401
        assert (await _webhook(st, {**paid, "amount_cents": 70_000})).status_code == 400
        assert (await _webhook(st, {**paid, "reference": "pay_other"})).status_code == 404
        assert (await _entries(st))[1:] == []  # nothing booked by any of them
        r = await _webhook(st, paid)
        assert r.status_code == 200 and r.json() == {"ok": True, "changed": True, "deposited": True}
        late = await _webhook(st, {**paid, "status": "pending"})  # an older state, late
        assert late.json() == {"ok": True, "changed": False, "deposited": False}
        failed = await _webhook(st, {**paid, "status": "failed"})  # terminal is final
        assert failed.json()["changed"] is False
        r = await st.sim.post(f"/payments/{provider_id}/complete", json={"status": "succeeded"})
        assert r.status_code == 200  # the provider's own report, after ours: a duplicate
        assert (await _succeeded(st, pid))["balance"] == 2700  # type: ignore[index]
        assert (await _entries(st))[1:] == [("deposit", 700, f"payment:{pid}")]


async def _task_row(st: Stack, task_id: str) -> Task | None:
    async with st.db.session() as s:
        return await s.get(Task, task_id)


async def _waiting_for_credit(st: Stack, task_id: str) -> Card | None:
    t = await _task_row(st, task_id)
    if t is None or t.status != "waiting_user" or "credit" not in t.status_reason:
        return None
    async with st.db.session() as s:
        return await s.scalar(select(Card).where(Card.task_id == task_id, Card.kind == "credit"))


@pytest.mark.parametrize("wake", ["webhook", "lost_wakeup"])
async def test_a_task_short_of_credit_continues_after_a_top_up(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    wake: str,
) -> None:
    """`lost_wakeup`: the deposit is committed and nothing else happens (the api died right
    after it, and no relay runs): the task's card timer finds the answered card itself."""
    provider = ScriptedProvider(
        [_tools(("generate_image", {"prompt": "a red fox"})), text("Here is the fox.")]
    )
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        provider=provider,
        initial_credit_cents=2,  # an image costs 4
        handoff_relay_seconds=0,
    ) as st:
        await st.sim.post("/sim/faults", json={"hold_payments": True, "duplicate_callbacks": 2})
        task_id, handle = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            "a red fox",
            card_wait_seconds=2,
            generation_wait_seconds=2,
        )
        card = await eventually(lambda: _waiting_for_credit(st, task_id), within=60)
        assert card.payload["needed_cents"] == 2 and card.status == "open"
        async with st.db.session() as s:
            assert await s.scalar(select(GenerationOrder)) is None  # nothing ordered yet
        top = await _top_up(st, 100)
        async with st.db.session() as s:
            provider_id = (await s.get(Payment, top["payment_id"])).provider_id  # type: ignore[union-attr]
        if wake == "webhook":
            r = await st.sim.post(f"/payments/{provider_id}/complete", json={})
            assert r.status_code == 200
        else:
            async with st.db.session() as s:
                report = Report(top["payment_id"], str(provider_id), "succeeded", 100, "EUR")
                booked = await apply_report(s, report, st.settings)
            assert booked.deposited and [c.id for c in booked.cards] == [card.id]
        assert await handle.result() == "completed"
        async with st.db.session() as s:
            order = await s.scalar(select(GenerationOrder))
            answered = await s.get(Card, card.id)
        assert order is not None and order.status == "succeeded" and order.object_id
        assert answered is not None and answered.status == "answered"
        assert (await _entries(st)) == [
            ("deposit", 2, "initial-credit"),
            ("deposit", 100, f"payment:{top['payment_id']}"),
            ("reserve", 4, order.idempotency_key),
            ("settle", 4, order.idempotency_key),
        ]
        budget = (await st.api.get("/v1/budget", headers=st.auth)).json()
        assert (budget["balance"], budget["spent"]) == (98, 4)
        assert provider.remaining == 0  # the rerun asked the model nothing

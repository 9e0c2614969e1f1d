"""Top-ups: the payment at the provider (the simulator plays it), and its signed webhook
booked as a deposit (money/payments.py), whose answered credit cards wake their tasks."""

from __future__ import annotations

import asyncio
import logging

import httpx

from api.schemas.budget import PaymentAck, PaymentReport, TopUp
from api.services.card_effects import HandoffState
from api.services.card_handoff import hand_on_bounded
from lomo.db.engine import Database
from lomo.settings import Settings
from lomo.states import PaymentStatus
from money.models import Account, Payment
from money.payments import (
    Report,
    apply_report,
    open_payment,
    own_payment,
    payment_view,
    record_checkout,
)

log = logging.getLogger(__name__)
PROVIDER_TIMEOUT = 10.0


async def start_top_up(
    db: Database, settings: Settings, user_id: str, amount: int, request_id: str | None
) -> TopUp:
    """Record the payment first, then create it at the provider with the payment's id as
    idempotency key: a retry (a repeated request, or a read of a payment the provider did
    not answer for) never makes a second payment there."""
    async with db.session() as s:
        p, _ = await open_payment(s, user_id, amount, request_id, settings)
    if p.status == PaymentStatus.CREATED:
        await _checkout(db, settings, p)
    return await read_top_up(db, settings, user_id, p.id, checkout=False)


async def read_top_up(
    db: Database, settings: Settings, user_id: str, payment_id: str, checkout: bool = True
) -> TopUp:
    async with db.session() as s:
        p = await own_payment(s, user_id, payment_id)
    if checkout and p.status == PaymentStatus.CREATED:
        await _checkout(db, settings, p)  # the provider did not answer before: ask again
    async with db.session() as s:
        p = await own_payment(s, user_id, payment_id)
        acc = await s.get(Account, user_id)
        return TopUp.model_validate({**payment_view(p), "balance": acc.balance_cents if acc else 0})


async def _checkout(db: Database, settings: Settings, p: Payment) -> None:
    body = {
        "amount_cents": p.amount_cents,
        "currency": p.currency,
        "reference": p.id,
        "webhook_url": f"{settings.resolved_api_url}/v1/payments/webhooks",
        "idempotency_key": p.id,
    }
    try:
        async with httpx.AsyncClient(timeout=PROVIDER_TIMEOUT) as http:
            r = await http.post(f"{settings.resolved_payments_url}/payments", json=body)
        r.raise_for_status()
        answer = r.json()
        provider_id = str(answer["payment_id"])
    except (httpx.HTTPError, ValueError, KeyError) as e:
        # Left `created`: reading the top-up asks the provider again with the same key.
        log.warning("top-up %s: the payment provider did not take it: %r", p.id, e)
        return
    async with db.session() as s:
        await record_checkout(s, p.id, provider_id, answer.get("checkout_url"))


async def record_payment_report(state: HandoffState, report: PaymentReport) -> PaymentAck:
    """Book the report; then wake the tasks whose credit cards the deposit answered (a
    wake-up that does not go through now is sent by the relay, or found by the task's own
    card timer: the answers are committed with the deposit)."""
    r = Report(
        report.reference,
        report.payment_id,
        report.status,
        report.amount_cents,
        report.currency,
        report.error,
    )
    async with state.db.session() as s:
        booked = await apply_report(s, r, state.settings)
    await asyncio.gather(*(hand_on_bounded(state, card) for card in booked.cards))
    return PaymentAck(ok=True, changed=booked.changed, deposited=booked.deposited)

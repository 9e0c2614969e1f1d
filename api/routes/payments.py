"""Top-ups from the person's app, and the payment provider's signed webhook."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import ValidationError

from api.deps import AppUser, DbDep, HandoffDep, SettingsDep, SignedBody
from api.schemas.budget import PaymentAck, PaymentReport, TopUp, TopUpIn
from api.services.payments import read_top_up, record_payment_report, start_top_up
from lomo.errors import InvalidInput

router = APIRouter(prefix="/v1", tags=["budget"])


@router.post("/budget/top-ups", status_code=201)
async def create_top_up(body: TopUpIn, user: AppUser, db: DbDep, settings: SettingsDep) -> TopUp:
    """Adding credit is the person's own act: an API token gets 403."""
    return await start_top_up(db, settings, user.id, body.amount_cents, body.request_id)


@router.get("/budget/top-ups/{payment_id}")
async def get_top_up(payment_id: str, user: AppUser, db: DbDep, settings: SettingsDep) -> TopUp:
    return await read_top_up(db, settings, user.id, payment_id)


@router.post("/payments/webhooks")
async def payment_webhook(body: SignedBody, state: HandoffDep) -> PaymentAck:
    """Signed like the generation callbacks: parsed only after the check (`SignedBody`)."""
    try:
        report = PaymentReport.model_validate_json(body)
    except ValidationError as e:
        raise InvalidInput(f"malformed payment report: {e.errors()[0]['msg']}") from e
    return await record_payment_report(state, report)

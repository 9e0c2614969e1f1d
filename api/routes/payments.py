"""Top-ups from the person's app, and the payment provider's signed webhook."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request
from pydantic import ValidationError

from api.deps import AppUser, DbDep, HandoffDep, SettingsDep
from api.schemas.budget import PaymentAck, PaymentReport, TopUp, TopUpIn
from api.services.payments import read_top_up, record_payment_report, start_top_up
from lomo.errors import InvalidInput, Unauthorized
from lomo.signing import refusal

router = APIRouter(prefix="/v1", tags=["budget"])


@router.post("/budget/top-ups", status_code=201)
async def create_top_up(body: TopUpIn, user: AppUser, db: DbDep, settings: SettingsDep) -> TopUp:
    """Adding credit is the person's own act: an API token gets 403."""
    return await start_top_up(db, settings, user.id, body.amount_cents, body.request_id)


@router.get("/budget/top-ups/{payment_id}")
async def get_top_up(payment_id: str, user: AppUser, db: DbDep, settings: SettingsDep) -> TopUp:
    return await read_top_up(db, settings, user.id, payment_id)


@router.post("/payments/webhooks")
async def payment_webhook(
    request: Request,
    state: HandoffDep,
    x_lomo_signature: Annotated[str | None, Header()] = None,
) -> PaymentAck:
    """Signed like the generation callbacks: the raw body is checked before it is parsed."""
    body = await request.body()
    settings = state.settings
    refused = refusal(
        settings.callback_secret.get_secret_value(),
        body,
        x_lomo_signature,
        settings.callback_max_age_seconds,
    )
    if refused:
        raise Unauthorized(refused)
    try:
        report = PaymentReport.model_validate_json(body)
    except ValidationError as e:
        raise InvalidInput(f"malformed payment report: {e.errors()[0]['msg']}") from e
    return await record_payment_report(state, report)

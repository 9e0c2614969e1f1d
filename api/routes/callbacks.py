"""Job reports from the generation upstream, signed with the shared callback secret."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request
from pydantic import ValidationError

from api.deps import DbDep, SettingsDep, TemporalDep
from api.schemas.callbacks import CallbackAck, JobReport
from api.services.callbacks import record_report
from lomo.errors import InvalidInput, Unauthorized
from lomo.signing import refusal

router = APIRouter(prefix="/v1/generation", tags=["generation"])


@router.post("/callbacks")
async def callback(
    request: Request,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalDep,
    x_lomo_signature: Annotated[str | None, Header()] = None,
) -> CallbackAck:
    """The signature covers the raw body, so the body is read as bytes and checked before
    it is parsed."""
    body = await request.body()
    refused = refusal(
        settings.callback_secret.get_secret_value(),
        body,
        x_lomo_signature,
        settings.callback_max_age_seconds,
    )
    if refused:
        raise Unauthorized(refused)
    try:
        report = JobReport.model_validate_json(body)
    except ValidationError as e:
        raise InvalidInput(f"malformed callback: {e.errors()[0]['msg']}") from e
    return await record_report(db, temporal, settings, report)

"""Job reports from the generation upstream, signed with the shared callback secret."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import ValidationError

from api.deps import DbDep, SettingsDep, SignedBody, TemporalDep
from api.schemas.callbacks import CallbackAck, JobReport
from api.services.callbacks import record_report
from lomo.errors import InvalidInput

router = APIRouter(prefix="/v1/generation", tags=["generation"])


@router.post("/callbacks")
async def callback(
    body: SignedBody, db: DbDep, settings: SettingsDep, temporal: TemporalDep
) -> CallbackAck:
    """The body is parsed only after its signature is checked (`SignedBody`)."""
    try:
        report = JobReport.model_validate_json(body)
    except ValidationError as e:
        raise InvalidInput(f"malformed callback: {e.errors()[0]['msg']}") from e
    return await record_report(db, temporal, settings, report)

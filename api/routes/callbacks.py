from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select

from api.deps import DbDep, SettingsDep, TemporalDep
from api.dispatch.flows import signal_flow_node
from api.dispatch.tasks import signal_generation
from lomo.db.models import GenerationOrder
from lomo.errors import InvalidInput, NotFound, Unauthorized
from lomo.signing import refusal
from money.orders import record_job_state

router = APIRouter(prefix="/v1/generation", tags=["generation"])


class JobReport(BaseModel):
    """A job report as the upstream sends it; bounded so no value can break a column."""

    model_config = ConfigDict(extra="allow")
    job_id: str = Field(min_length=1, max_length=80)
    status: str = Field(min_length=1, max_length=20)
    progress: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    seq: int | None = Field(default=None, ge=-1, le=2**31 - 1)
    idempotency_key: str | None = Field(default=None, max_length=120)
    result_url: str | None = None
    error: str | None = None


@router.post("/callbacks")
async def callback(
    request: Request,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalDep,
    x_lomo_signature: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
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
    ev = report.model_dump()
    job_id, status = report.job_id, report.status
    async with db.session() as s:
        order = await s.scalar(
            select(GenerationOrder)
            .where(GenerationOrder.upstream_job_id == job_id)
            .with_for_update()
        )
        if order is None and report.idempotency_key:
            # A job whose id was never recorded (an unclear submit): its order adopts it by
            # sending the key again (an idempotent upstream; the task's poll then reads the
            # state) or is failed and refunded. Acknowledge, change nothing.
            unclear = await s.scalar(
                select(GenerationOrder.id).where(
                    GenerationOrder.idempotency_key == report.idempotency_key,
                    GenerationOrder.upstream_job_id.is_(None),
                )
            )
            if unclear is not None:
                return {"ok": True, "changed": False}
        key = report.idempotency_key
        if order is None or (key is not None and key != order.idempotency_key):
            # The upstream echoes the key the order was submitted with: a report whose key
            # names another order (another person's job) is refused like an unknown job.
            raise NotFound(f"no order for job {job_id}")
        changed, became_terminal = await record_job_state(
            s, order, status, report.progress, report.seq, ev, settings
        )
        task_id, order_id, final = order.task_id, order.id, order.status
        order_key = order.idempotency_key
    # Wake only on the transition into a terminal state: duplicates never wake twice.
    if became_terminal and not await signal_flow_node(temporal, order_key, order_id, final):
        await signal_generation(temporal, task_id, order_id, final)
    return {"ok": True, "changed": changed}

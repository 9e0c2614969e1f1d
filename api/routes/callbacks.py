from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from sqlalchemy import select

from api.deps import DbDep, SettingsDep, TemporalDep
from api.dispatch import signal_generation
from api.flow_dispatch import signal_flow_node
from lomo.db.models import GenerationOrder
from lomo.errors import InvalidInput, NotFound, Unauthorized
from lomo.signing import verify
from money.orders import record_job_state

router = APIRouter(prefix="/v1/generation", tags=["generation"])


@router.post("/callbacks")
async def callback(
    request: Request,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalDep,
    x_lomo_signature: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    body = await request.body()
    if not verify(settings.callback_secret.get_secret_value(), body, x_lomo_signature):
        raise Unauthorized("bad or missing X-Lomo-Signature")
    try:
        ev = json.loads(body)
        job_id, status = str(ev["job_id"]), str(ev["status"])
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidInput(f"malformed callback: {e}") from e
    async with db.session() as s:
        order = await s.scalar(
            select(GenerationOrder)
            .where(GenerationOrder.upstream_job_id == job_id)
            .with_for_update()
        )
        if order is None and ev.get("idempotency_key"):
            # A job whose id was never recorded: its submit was unclear, so its order is
            # (or will be) failed and refunded, never adopted. Acknowledge, change nothing.
            unclear = await s.scalar(
                select(GenerationOrder.id).where(
                    GenerationOrder.idempotency_key == str(ev["idempotency_key"]),
                    GenerationOrder.upstream_job_id.is_(None),
                )
            )
            if unclear is not None:
                return {"ok": True, "changed": False}
        if order is None:
            raise NotFound(f"no order for job {job_id}")
        changed, became_terminal = await record_job_state(
            s, order, status, float(ev.get("progress", 0)), ev.get("seq"), ev, settings
        )
        task_id, order_id, final = order.task_id, order.id, order.status
        order_key = order.idempotency_key
    # Wake only on the transition into a terminal state: duplicates never wake twice.
    if became_terminal and not await signal_flow_node(temporal, order_key, order_id, final):
        await signal_generation(temporal, task_id, order_id, final)
    return {"ok": True, "changed": changed}

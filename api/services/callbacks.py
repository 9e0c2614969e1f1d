"""A generation upstream's job report: the order's new state is recorded, and its task or
flow run is woken when the order reaches a terminal state."""

from __future__ import annotations

from sqlalchemy import select
from temporalio.client import Client

from api.dispatch.flows import signal_flow_node
from api.dispatch.tasks import signal_generation
from api.schemas.callbacks import CallbackAck, JobReport
from lomo.db.engine import Database
from lomo.db.models import GenerationOrder
from lomo.errors import NotFound
from lomo.settings import Settings
from money.orders import record_job_state


async def record_report(
    db: Database, temporal: Client, settings: Settings, report: JobReport
) -> CallbackAck:
    job_id, key = report.job_id, report.idempotency_key
    async with db.session() as s:
        order = await s.scalar(
            select(GenerationOrder)
            .where(GenerationOrder.upstream_job_id == job_id)
            .with_for_update()
        )
        if order is None and key:
            # A job whose id was never recorded (an unclear submit): its order adopts it by
            # sending the key again (an idempotent upstream; the task's poll then reads the
            # state) or is failed and refunded. Acknowledge, change nothing.
            unclear = await s.scalar(
                select(GenerationOrder.id).where(
                    GenerationOrder.idempotency_key == key,
                    GenerationOrder.upstream_job_id.is_(None),
                )
            )
            if unclear is not None:
                return CallbackAck(ok=True, changed=False)
        if order is None or (key is not None and key != order.idempotency_key):
            # The upstream echoes the key the order was submitted with: a report whose key
            # names another order (another person's job) is refused like an unknown job.
            raise NotFound(f"no order for job {job_id}")
        changed, became_terminal = await record_job_state(
            s, order, report.status, report.progress, report.seq, report.model_dump(), settings
        )
        task_id, order_id, final = order.task_id, order.id, order.status
        order_key = order.idempotency_key
    # Wake only on the transition into a terminal state: duplicates never wake twice.
    if became_terminal and not await signal_flow_node(temporal, order_key, order_id, final):
        await signal_generation(temporal, task_id, order_id, final)
    return CallbackAck(ok=True, changed=changed)

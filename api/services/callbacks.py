"""A generation upstream's job report: the order's new state is recorded, and its task or
flow run is woken when the order reaches a terminal state."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client

from api.dispatch.flows import signal_flow_node
from api.dispatch.tasks import signal_generation
from api.schemas.callbacks import CallbackAck, JobReport
from lomo.db.engine import Database
from lomo.db.models import GenerationOrder
from lomo.errors import NotFound
from lomo.settings import Settings
from money.orders import record_job_id, record_job_state


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
            order = await _unclear(s, key)
            if order is not None:
                # Only an upstream that honours keys has one job per key; from any other
                # the order of an unclear submit is failed and refunded, and its reports
                # change nothing (money/orders.py, the refund rule).
                if not settings.generation_upstream_idempotent:
                    return CallbackAck(ok=True, changed=False)
                await _adopt(s, order, job_id)
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


async def _unclear(s: AsyncSession, key: str) -> GenerationOrder | None:
    """The order of this key that holds no job id yet, locked."""
    return await s.scalar(
        select(GenerationOrder)
        .where(GenerationOrder.idempotency_key == key, GenerationOrder.upstream_job_id.is_(None))
        .with_for_update()
    )


async def _adopt(s: AsyncSession, order: GenerationOrder, job_id: str) -> None:
    """A signed report names the order by its key before the order holds its job id: the
    report outran the submit's answer (a fast job), or that answer was lost. The job id is
    recorded as the submit would have (the same conditional writes: an order failed
    meanwhile stays failed), so the report applies and the task is woken now rather than
    at its next poll."""
    await record_job_id(s, order.id, job_id)
    await s.refresh(order)

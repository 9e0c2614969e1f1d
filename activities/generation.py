"""Generation activities: poll a job, collect its result (the tools are `tools/generation.py`)."""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.types import OrderRef, OrderState
from lomo.db.models import GenerationOrder
from lomo.events import append_event
from money.orders import (
    UNCLEAR_SUBMIT,
    claim_submit,
    fail_order,
    record_job_state,
    submit_unclear,
)
from tools.base import ToolDeps
from tools.generation import MEDIA, fail, job_request, keep_job_id, now, post_job, refused
from workspace.store import create_asset


class GenerationActivities:
    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps

    @activity.defn(name="poll_generation")
    async def poll_generation(self, ref: OrderRef) -> OrderState:
        settings = self.deps.settings
        async with self.deps.db.session() as s:
            order = await s.get(GenerationOrder, ref.order_id, with_for_update=True)
            if order is None:
                raise ApplicationError(f"no order {ref.order_id}", non_retryable=True)
            job_id = order.upstream_job_id
            body: dict[str, Any] | None = None
            if job_id is None:
                # No job id: a submit still in flight, or an unclear one.
                if not settings.generation_upstream_idempotent:
                    # The refund rule: failed + refunded once its time is up, never resent.
                    if submit_unclear(order, settings) or order.submit_started_at is None:
                        await fail_order(s, order, UNCLEAR_SUBMIT, settings)
                    return OrderState(order.id, order.status)
                # An idempotent upstream is asked with the same key: a POST it has seen
                # answers that key's job (racing the submit in flight is harmless).
                if not await claim_submit(s, order.id, again=True):
                    return OrderState(order.id, order.status)
                body = job_request(order, settings)
        if body is not None:
            posted = await post_job(self.deps, body)  # unclear again: Temporal retries
            if posted.status_code >= 400:
                status = await fail(self.deps, ref.order_id, refused(posted))
                return OrderState(ref.order_id, status)
            job_id = await keep_job_id(self.deps.db, ref.order_id, posted)
        r = await self.deps.http.get(f"{settings.resolved_sim_url}/jobs/{job_id}")
        r.raise_for_status()
        job = r.json()
        async with self.deps.db.session() as s:
            order = await s.get(GenerationOrder, ref.order_id, with_for_update=True)
            assert order is not None
            await record_job_state(
                s, order, job["status"], float(job.get("progress", 0)), None, job, settings
            )
            return OrderState(order.id, order.status)

    @activity.defn(name="collect_generation")
    async def collect_generation(self, ref: OrderRef) -> OrderState:
        """Turn a finished job into a workspace asset, once (idempotent on the order)."""
        async with self.deps.db.session() as s:
            order = await s.get(GenerationOrder, ref.order_id)
            if order is None:
                raise ApplicationError(f"no order {ref.order_id}", non_retryable=True)
            if order.object_id or order.status != "succeeded":
                return OrderState(order.id, order.status)
            url, kind = order.result_url, order.kind
        if not url:
            raise ApplicationError(f"order {ref.order_id} succeeded without a result url")
        r = await self.deps.http.get(url)
        r.raise_for_status()
        async with self.deps.db.session() as s:
            order = await s.get(GenerationOrder, ref.order_id, with_for_update=True)
            assert order is not None
            if order.object_id:
                return OrderState(order.id, order.status)
            obj = await create_asset(
                s,
                self.deps.assets,
                order.workspace_id,
                name=f"{kind} {order.id}",
                data=r.content,
                media_type=r.headers.get(
                    "content-type", MEDIA.get(kind, "application/octet-stream")
                ),
                created_by=f"task:{order.task_id}:{order.idempotency_key}",
                provenance={
                    "task_id": order.task_id,
                    "call_id": order.idempotency_key,
                    "order_id": order.id,
                },
                task_id=order.task_id,
            )
            order.object_id, order.updated_at = obj.id, now()
            await append_event(
                s,
                order.workspace_id,
                "object.version",
                {"object_id": obj.id, "version": 1, "task_id": order.task_id},
            )
            return OrderState(order.id, order.status)

    def all(self) -> list[Any]:
        return [self.poll_generation, self.collect_generation]

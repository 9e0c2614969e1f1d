"""Paid generation: the generation tools, the job state machine, polling and collection.

An order per paid call, unique on (workspace, idempotency_key = call_id). The callback
route and the compensating poll share `record_job_state`, so a lost callback and a
delivered one end the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.toolkit import Tool, ToolCallContext, ToolDeps, ToolResult, error
from lomo.catalogue import DEFAULT_MODEL, validate_request
from lomo.db.models import GenerationOrder
from lomo.errors import InvalidInput, NotFound
from lomo.events import append_event
from lomo.ids import new_id
from lomo.llm.types import ToolSpec
from workflows.types import OrderRef, OrderState
from workspace.store import create_asset, get_object

# Order states in their only allowed direction; a lower rank never overwrites a higher one.
ORDER_RANK = {"created": 0, "submitted": 1, "queued": 2, "running": 3, "succeeded": 4, "failed": 4}
TERMINAL_ORDER = ("succeeded", "failed")
MEDIA = {"image": "image/png", "video": "video/mp4", "audio": "audio/wav", "3d": "model/obj"}


def now() -> datetime:
    return datetime.now(UTC)


GENERATION_SPECS = {
    "image": ToolSpec(
        name="generate_image",
        description="Generate one image. Returns an order; the result arrives later.",
        input_schema={
            "type": "object",
            "properties": {
                "prompt": {"type": "string"},
                "model": {"type": "string"},
                "width": {"type": "integer"},
                "height": {"type": "integer"},
            },
            "required": ["prompt"],
        },
    ),
    "video": ToolSpec(
        name="generate_video",
        description="Generate a short video, optionally animating a reference image asset.",
        input_schema={
            "type": "object",
            "properties": {
                "prompt": {"type": "string"},
                "model": {"type": "string"},
                "duration_s": {"type": "number"},
                "reference_object_id": {"type": "string"},
            },
            "required": ["prompt"],
        },
    ),
}


class GenerateTool(Tool):
    """Submit one generation job for the call; idempotent on the call's `call_id`."""

    idempotent = True

    def __init__(self, deps: ToolDeps, kind: str) -> None:
        self.deps = deps
        self.kind = kind
        self.spec = GENERATION_SPECS[kind]
        self.domain = "core"

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        try:
            await self._check(ctx, args)
        except (InvalidInput, NotFound) as e:
            # The model asked for something impossible: it hears why, nothing is spent.
            return error(e.detail)
        order_id = await self._submit(ctx, args)
        return ToolResult(
            "done",
            {"status": "submitted", "order_id": order_id},
            order_id=order_id,
            made_progress=True,
        )

    async def _check(self, ctx: ToolCallContext, args: dict[str, Any]) -> None:
        validate_request(self.kind, args)
        ref = args.get("reference_object_id")
        if ref:
            async with self.deps.db.session() as s:
                obj = await get_object(s, ctx.user_id, str(ref))
                if obj.type != "asset" or obj.deleted:
                    raise InvalidInput(f"{ref} is not an asset that can be used as reference")

    async def _submit(self, ctx: ToolCallContext, args: dict[str, Any]) -> str:
        async with self.deps.db.session() as s:
            order = await s.scalar(
                select(GenerationOrder).where(
                    GenerationOrder.workspace_id == ctx.user_id,
                    GenerationOrder.idempotency_key == ctx.call_id,
                )
            )
            if order is None:
                order = GenerationOrder(
                    id=new_id("ord"),
                    workspace_id=ctx.user_id,
                    task_id=ctx.task_id,
                    idempotency_key=ctx.call_id,
                    kind=self.kind,
                    model=str(args.get("model") or DEFAULT_MODEL[self.kind]),
                    params=args,
                )
                s.add(order)
            order_id, upstream = order.id, order.upstream_job_id
            body = {
                "kind": self.kind,
                "model": order.model,
                "params": order.params,
                "callback_url": f"{self.deps.settings.resolved_api_url}/v1/generation/callbacks",
                "idempotency_key": ctx.call_id,
            }
        if upstream is None:
            r = await self.deps.http.post(f"{self.deps.settings.resolved_sim_url}/jobs", json=body)
            r.raise_for_status()
            job_id = r.json()["job_id"]
            async with self.deps.db.session() as s:  # persist the job id at once
                order = await s.get(GenerationOrder, order_id)
                assert order is not None
                order.upstream_job_id = job_id
                if ORDER_RANK[order.status] < ORDER_RANK["submitted"]:
                    order.status = "submitted"
                order.updated_at = now()
        return order_id


def generation_tools(deps: ToolDeps) -> list[Tool]:
    return [GenerateTool(deps, "image"), GenerateTool(deps, "video")]


class GenerationActivities:
    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps

    @activity.defn(name="poll_generation")
    async def poll_generation(self, ref: OrderRef) -> OrderState:
        async with self.deps.db.session() as s:
            order = await s.get(GenerationOrder, ref.order_id)
            if order is None:
                raise ApplicationError(f"no order {ref.order_id}", non_retryable=True)
            job_id = order.upstream_job_id
        if job_id is None:
            return OrderState(ref.order_id, "failed")
        r = await self.deps.http.get(f"{self.deps.settings.resolved_sim_url}/jobs/{job_id}")
        r.raise_for_status()
        job = r.json()
        async with self.deps.db.session() as s:
            order = await s.get(GenerationOrder, ref.order_id)
            assert order is not None
            await record_job_state(
                s, order, job["status"], float(job.get("progress", 0)), None, job
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


def apply_job_state(
    order: GenerationOrder,
    status: str,
    progress: float,
    seq: int | None,
    job: dict[str, Any],
) -> bool:
    """Monotonic job state machine; returns True if anything changed."""
    if order.status in TERMINAL_ORDER:
        return False  # terminal is final: duplicates and late events change nothing
    if seq is not None and seq <= order.last_seq:
        return False
    if ORDER_RANK.get(status, -1) < ORDER_RANK[order.status]:
        return False
    changed = status != order.status or progress > order.progress
    order.status = status
    order.progress = max(order.progress, progress)
    if seq is not None:
        order.last_seq = seq
    if status == "succeeded":
        order.result_url = job.get("result_url")
        order.progress = 1.0
    if status == "failed":
        order.error = job.get("error") or "upstream failure"
    order.updated_at = now()
    return changed


async def record_job_state(
    session: AsyncSession,
    order: GenerationOrder,
    status: str,
    progress: float,
    seq: int | None,
    job: dict[str, Any],
) -> tuple[bool, bool]:
    """Apply a job report (callback or poll) and emit its event; returns (changed, became
    terminal). Both paths share it so a lost callback and a delivered one look the same."""
    was_terminal = order.status in TERMINAL_ORDER
    changed = apply_job_state(order, status, progress, seq, job)
    now_terminal = order.status in TERMINAL_ORDER
    if changed:
        await append_event(
            session,
            order.workspace_id,
            "generation.completed" if now_terminal else "generation.progress",
            {
                "order_id": order.id,
                "task_id": order.task_id,
                "status": order.status,
                "progress": order.progress,
            },
        )
    return changed, now_terminal and not was_terminal

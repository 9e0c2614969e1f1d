"""Runtime activities as methods of one class that receives its clients."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.context import GENERATION_TOOLS, build_context
from lomo.catalogue import DEFAULT_MODEL, catalogue_text, validate_request
from lomo.db.engine import Database
from lomo.db.models import GenerationOrder, MessageRow, ModelStep, Task, ToolCall
from lomo.errors import InvalidInput, NotFound
from lomo.events import append_event
from lomo.ids import new_id
from lomo.llm.offline import detect_language
from lomo.llm.types import (
    Message,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    TextBlock,
)
from workflows.types import (
    OrderRef,
    OrderState,
    PlannedCall,
    RouteDecision,
    RouteInput,
    StatusInput,
    StepDecision,
    StepInput,
    ToolInput,
    ToolOutcome,
)
from workspace.store import AssetStore, create_asset, get_object

log = logging.getLogger(__name__)

# Order states in their only allowed direction; a lower rank never overwrites a higher one.
ORDER_RANK = {"created": 0, "submitted": 1, "queued": 2, "running": 3, "succeeded": 4, "failed": 4}
TERMINAL_ORDER = ("succeeded", "failed")
ROUTER_RULES = (
    "Route the person's message: call the tool `route` with decision answer (you answer "
    "yourself: simple or capability questions, from the catalogue below), lightweight (one "
    "generation), new (a persistent task). Generation model catalogue:\n"
)
MEDIA = {"image": "image/png", "video": "video/mp4", "audio": "audio/wav", "3d": "model/obj"}


def now() -> datetime:
    return datetime.now(UTC)


class RuntimeActivities:
    def __init__(
        self,
        db: Database,
        provider: ModelProvider,
        http: httpx.AsyncClient,
        assets: AssetStore,
        sim_url: str,
        callback_url: str,
        max_steps_per_turn: int = 8,
        generation_wait_seconds: float = 60.0,
    ) -> None:
        self.max_steps_per_turn = max_steps_per_turn
        self.generation_wait_seconds = generation_wait_seconds
        self.db = db
        self.provider = provider
        self.http = http
        self.assets = assets
        self.sim_url = sim_url
        self.callback_url = callback_url

    # --- routing --------------------------------------------------------------------
    @activity.defn(name="route_message")
    async def route_message(self, inp: RouteInput) -> RouteDecision:
        async with self.db.session() as s:
            msg = await s.get(MessageRow, inp.message_id)
            if msg is None or msg.user_id != inp.user_id:
                raise ApplicationError(f"no message {inp.message_id}", non_retryable=True)
            if msg.routing_status == "routed":  # a retry after the decision was stored
                return self._decision(msg.decision or "answer", msg.task_id, None)
        req = ModelRequest(
            system=[SystemBlock(text=ROUTER_RULES + catalogue_text(), cache=True)],
            messages=[Message(role="user", content=[TextBlock(text=msg.text)])],
            purpose="route",
        )
        resp = await self.provider.complete(req)
        uses = [u for u in resp.tool_uses if u.name == "route"]
        decision = str(uses[0].input.get("decision", "answer")) if uses else "answer"
        if decision not in ("answer", "lightweight", "new", "existing", "clarify"):
            raise ApplicationError(f"router returned {decision!r}", non_retryable=True)
        task_id: str | None = None
        kind = "persistent" if decision == "new" else "lightweight"
        async with self.db.session() as s:
            msg = await s.get(MessageRow, inp.message_id)
            assert msg is not None
            if decision in ("lightweight", "new"):
                task_id = new_id("tsk")
                s.add(
                    Task(
                        id=task_id,
                        user_id=inp.user_id,
                        kind=kind,
                        status="running",
                        goal=msg.text[:500],
                        language=detect_language(msg.text),
                    )
                )
                await s.flush()
                await append_event(
                    s, inp.user_id, "task.created", {"task_id": task_id, "kind": kind}
                )
            elif decision == "answer":
                answer = str(uses[0].input.get("answer") or "") if uses else ""
                await append_event(
                    s,
                    inp.user_id,
                    "task.reply",
                    {"message_id": msg.id, "text": answer or resp.text},
                )
            msg.routing_status, msg.decision, msg.task_id = "routed", decision, task_id
            await append_event(
                s,
                inp.user_id,
                "message.routed",
                {"message_id": msg.id, "decision": decision, "task_id": task_id},
            )
        return self._decision(decision, task_id, kind)

    def _decision(self, decision: str, task_id: str | None, kind: str | None) -> RouteDecision:
        return RouteDecision(
            decision,
            task_id,
            kind,
            max_steps_per_turn=self.max_steps_per_turn,
            generation_wait_seconds=self.generation_wait_seconds,
        )

    # --- model steps ----------------------------------------------------------------
    @activity.defn(name="model_step")
    async def model_step(self, inp: StepInput) -> StepDecision:
        async with self.db.session() as s:
            done = await s.scalar(
                select(ModelStep).where(
                    ModelStep.task_id == inp.task_id,
                    ModelStep.turn == inp.turn,
                    ModelStep.step == inp.step,
                )
            )
            if done is not None:  # the decision is persisted: never ask the model twice
                return _decision(ModelResponse.from_dict(done.response))
            task = await s.get(Task, inp.task_id)
            if task is None:
                raise ApplicationError(f"no task {inp.task_id}", non_retryable=True)
            task.turn = inp.turn
            built = await build_context(s, task, inp.turn, inp.step, inp.message_ids)
        resp = await self.provider.complete(built.request)
        async with self.db.session() as s:
            s.add(
                ModelStep(
                    task_id=inp.task_id,
                    turn=inp.turn,
                    step=inp.step,
                    context={
                        "layers": built.layers,
                        "tools": [t.name for t in built.request.tools],
                    },
                    response=resp.to_dict(),
                )
            )
            await s.execute(
                update(MessageRow)
                .where(MessageRow.id.in_(inp.message_ids))
                .values(processed_turn=inp.turn, processed_step=inp.step, task_id=inp.task_id)
            )
            task = await s.get(Task, inp.task_id)
            assert task is not None
            task.turn, task.updated_at = inp.turn, now()
            for i, use in enumerate(resp.tool_uses):
                s.add(
                    ToolCall(
                        call_id=f"{inp.task_id}:{inp.turn}:{inp.step}:{i}",
                        task_id=inp.task_id,
                        tool_use_id=use.id,
                        name=use.name,
                        input=use.input,
                        status="planned",
                    )
                )
            if resp.text:
                await append_event(
                    s, task.user_id, "task.reply", {"task_id": task.id, "text": resp.text}
                )
        return _decision(resp)

    # --- tools ----------------------------------------------------------------------
    @activity.defn(name="run_tool")
    async def run_tool(self, inp: ToolInput) -> ToolOutcome:
        async with self.db.session() as s:
            call = await s.get(ToolCall, inp.call_id)
            if call is None:
                raise ApplicationError(f"no planned call {inp.call_id}", non_retryable=True)
            if call.status in ("done", "error") and call.result is not None:
                return ToolOutcome(call.status, call.result.get("order_id"))
            call.status = "started"
            name, args = call.name, dict(call.input)
        if name in GENERATION_TOOLS:
            kind = GENERATION_TOOLS[name]
            try:
                await self._check_generation(inp.task_id, kind, args)
            except (InvalidInput, NotFound) as e:
                # The model asked for something impossible: it hears why, nothing is spent.
                return await self._finish_call(inp.call_id, {"error": e.detail}, "error")
            return await self._generate(inp, kind, args)
        return await self._finish_call(inp.call_id, {"error": f"unknown tool {name}"}, "error")

    async def _check_generation(self, task_id: str, kind: str, args: dict[str, Any]) -> None:
        validate_request(kind, args)
        ref = args.get("reference_object_id")
        if ref:
            async with self.db.session() as s:
                task = await s.get(Task, task_id)
                assert task is not None
                obj = await get_object(s, task.user_id, str(ref))
                if obj.type != "asset" or obj.deleted:
                    raise InvalidInput(f"{ref} is not an asset that can be used as reference")

    async def _generate(self, inp: ToolInput, kind: str, args: dict[str, Any]) -> ToolOutcome:
        async with self.db.session() as s:
            task = await s.get(Task, inp.task_id)
            assert task is not None
            order = await s.scalar(
                select(GenerationOrder).where(
                    GenerationOrder.workspace_id == task.user_id,
                    GenerationOrder.idempotency_key == inp.call_id,
                )
            )
            if order is None:
                order = GenerationOrder(
                    id=new_id("ord"),
                    workspace_id=task.user_id,
                    task_id=task.id,
                    idempotency_key=inp.call_id,
                    kind=kind,
                    model=str(args.get("model") or DEFAULT_MODEL[kind]),
                    params=args,
                )
                s.add(order)
            order_id, upstream = order.id, order.upstream_job_id
            body = {
                "kind": kind,
                "model": order.model,
                "params": order.params,
                "callback_url": self.callback_url,
                "idempotency_key": inp.call_id,
            }
        if upstream is None:
            r = await self.http.post(f"{self.sim_url}/jobs", json=body)
            r.raise_for_status()
            job_id = r.json()["job_id"]
            async with self.db.session() as s:  # persist the job id at once
                order = await s.get(GenerationOrder, order_id)
                assert order is not None
                order.upstream_job_id = job_id
                if ORDER_RANK[order.status] < ORDER_RANK["submitted"]:
                    order.status = "submitted"
                order.updated_at = now()
        result = {"status": "submitted", "order_id": order_id}
        outcome = await self._finish_call(inp.call_id, result, "done")
        outcome.order_id = order_id
        outcome.made_progress = True
        return outcome

    async def _finish_call(self, call_id: str, result: dict[str, Any], status: str) -> ToolOutcome:
        async with self.db.session() as s:
            call = await s.get(ToolCall, call_id)
            assert call is not None
            call.status, call.result, call.updated_at = status, result, now()
        return ToolOutcome(status)

    # --- generation -----------------------------------------------------------------
    @activity.defn(name="poll_generation")
    async def poll_generation(self, ref: OrderRef) -> OrderState:
        async with self.db.session() as s:
            order = await s.get(GenerationOrder, ref.order_id)
            if order is None:
                raise ApplicationError(f"no order {ref.order_id}", non_retryable=True)
            job_id = order.upstream_job_id
        if job_id is None:
            return OrderState(ref.order_id, "failed")
        r = await self.http.get(f"{self.sim_url}/jobs/{job_id}")
        r.raise_for_status()
        job = r.json()
        async with self.db.session() as s:
            order = await s.get(GenerationOrder, ref.order_id)
            assert order is not None
            await record_job_state(
                s, order, job["status"], float(job.get("progress", 0)), None, job
            )
            return OrderState(order.id, order.status)

    @activity.defn(name="collect_generation")
    async def collect_generation(self, ref: OrderRef) -> OrderState:
        """Turn a finished job into a workspace asset, once (idempotent on the order)."""
        async with self.db.session() as s:
            order = await s.get(GenerationOrder, ref.order_id)
            if order is None:
                raise ApplicationError(f"no order {ref.order_id}", non_retryable=True)
            if order.object_id or order.status != "succeeded":
                return OrderState(order.id, order.status)
            url, kind = order.result_url, order.kind
        if not url:
            raise ApplicationError(f"order {ref.order_id} succeeded without a result url")
        r = await self.http.get(url)
        r.raise_for_status()
        async with self.db.session() as s:
            order = await s.get(GenerationOrder, ref.order_id, with_for_update=True)
            assert order is not None
            if order.object_id:
                return OrderState(order.id, order.status)
            obj = await create_asset(
                s,
                self.assets,
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

    @activity.defn(name="set_task_status")
    async def set_task_status(self, inp: StatusInput) -> None:
        async with self.db.session() as s:
            task = await s.get(Task, inp.task_id)
            if task is None:
                raise ApplicationError(f"no task {inp.task_id}", non_retryable=True)
            if task.status == inp.status:
                return
            task.status, task.updated_at = inp.status, now()
            if inp.reason:
                task.summary = inp.reason
            await append_event(
                s,
                task.user_id,
                "task.status",
                {"task_id": task.id, "status": inp.status, "reason": inp.reason},
            )

    def all(self) -> list[Any]:
        return [
            self.route_message,
            self.model_step,
            self.run_tool,
            self.poll_generation,
            self.collect_generation,
            self.set_task_status,
        ]


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


def _decision(resp: ModelResponse) -> StepDecision:
    calls = [PlannedCall(i, u.name) for i, u in enumerate(resp.tool_uses)]
    return StepDecision(calls=calls, end_turn=resp.stop_reason != "tool_use" or not calls)

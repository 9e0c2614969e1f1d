"""The runtime's activities: model steps, the journaled tool dispatcher, task status."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.context import build_context
from activities.toolkit import Tool, ToolCallContext, ToolDeps, ToolResult, error
from lomo.db.models import MessageRow, ModelStep, Task, ToolCall
from lomo.events import append_event
from lomo.llm.types import ModelProvider, ModelResponse
from workflows.types import (
    PlannedCall,
    StatusInput,
    StepDecision,
    StepInput,
    ToolInput,
    ToolOutcome,
)

log = logging.getLogger(__name__)


def now() -> datetime:
    return datetime.now(UTC)


class RuntimeActivities:
    def __init__(self, deps: ToolDeps, provider: ModelProvider, tools: dict[str, Tool]) -> None:
        self.deps = deps
        self.db = deps.db
        self.provider = provider
        self.tools = tools

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
            built = await build_context(
                s, task, inp.turn, inp.step, inp.message_ids, list(self.tools.values())
            )
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
        """Journal the call under its call_id, then dispatch; a replay returns the record."""
        async with self.db.session() as s:
            call = await s.get(ToolCall, inp.call_id, with_for_update=True)
            if call is None:
                raise ApplicationError(f"no planned call {inp.call_id}", non_retryable=True)
            if call.result is not None:  # finished before: same answer, no second effect
                return _outcome(call.status, call.result)
            task = await s.get(Task, inp.task_id)
            assert task is not None
            tool = self.tools.get(call.name)
            crashed_mid_call = call.status == "started"
            call.status, call.updated_at = "started", now()
            name, args, user_id = call.name, dict(call.input), task.user_id
        if tool is None:
            res = error(f"unknown tool {name}")
        elif crashed_mid_call and not tool.idempotent:
            # Our own call started without a result: it may or may not have acted. Never
            # act twice; the model must check the state first.
            res = ToolResult(
                "outcome_unknown",
                {
                    "status": "outcome_unknown",
                    "detail": f"{name} was interrupted; check the current state before "
                    "repeating it",
                },
            )
        else:
            _, turn, step, index = inp.call_id.rsplit(":", 3)
            ctx = ToolCallContext(
                inp.task_id, user_id, inp.call_id, int(turn), int(step), int(index)
            )
            res = await tool.run(ctx, args)
        async with self.db.session() as s:
            call = await s.get(ToolCall, inp.call_id, with_for_update=True)
            assert call is not None
            if call.result is not None:  # a concurrent attempt recorded first: keep its record
                return _outcome(call.status, call.result)
            record = dict(res.result)
            for key in ("order_id", "card_id"):
                if getattr(res, key):
                    record.setdefault(key, getattr(res, key))
            if res.artifacts:
                record.setdefault("artifacts", res.artifacts)
            record["_progress"] = res.made_progress
            call.status, call.result, call.updated_at = res.status, record, now()
        return _outcome(res.status, record)

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
        return [self.model_step, self.run_tool, self.set_task_status]


def _outcome(status: str, record: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome(
        status=status,
        order_id=record.get("order_id"),
        made_progress=bool(record.get("_progress")),
        card_id=record.get("card_id"),
    )


def _decision(resp: ModelResponse) -> StepDecision:
    calls = [PlannedCall(i, u.name) for i, u in enumerate(resp.tool_uses)]
    return StepDecision(calls=calls, end_turn=resp.stop_reason != "tool_use" or not calls)

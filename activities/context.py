"""The context builder: stable prefix first, dynamic tail last (ARCHITECTURE §2)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from activities.toolkit import Tool
from lomo.db.models import GenerationOrder, MessageRow, ModelStep, Task, ToolCall, WorkObject
from lomo.llm.types import (
    Block,
    Message,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    TextBlock,
    ToolResultBlock,
)

SYSTEM_RULES = (
    "You are Lomo, a creative agent working with one person over days. Answer in the "
    "language of the person's own messages. Use tools for every side effect; never claim an "
    "approval the person did not give. Lines starting with [runtime] come from the platform."
)


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


@dataclass
class BuiltContext:
    request: ModelRequest
    layers: list[dict[str, Any]]


async def build_context(
    session: AsyncSession,
    task: Task,
    turn: int,
    step: int,
    message_ids: list[str],
    tools: list[Tool],
) -> BuiltContext:
    steps = list(
        await session.scalars(
            select(ModelStep).where(ModelStep.task_id == task.id).order_by(ModelStep.id)
        )
    )
    msgs = {
        m.id: m
        for m in await session.scalars(select(MessageRow).where(MessageRow.task_id == task.id))
    }
    calls = {
        c.tool_use_id: c
        for c in await session.scalars(select(ToolCall).where(ToolCall.task_id == task.id))
    }
    conversation: list[Message] = []

    def add(role: str, blocks: list[Block]) -> None:
        if conversation and conversation[-1].role == role:
            conversation[-1].content.extend(blocks)
        else:
            conversation.append(Message(role=role, content=list(blocks)))  # type: ignore[arg-type]

    for s in steps:
        seen = [
            m for m in msgs.values() if (m.processed_turn, m.processed_step) == (s.turn, s.step)
        ]
        for m in sorted(seen, key=lambda m: m.created_at):
            add("user", [TextBlock(text=m.text)])
        resp = ModelResponse.from_dict(s.response)
        add("assistant", list(resp.content))
        results: list[Block] = []
        for tu in resp.tool_uses:
            call = calls.get(tu.id)
            content = (
                json.dumps(_visible(call.result))
                if call and call.result
                else '{"status": "missing"}'
            )
            results.append(ToolResultBlock(tool_use_id=tu.id, content=content))
        if results:
            add("user", results)
    for mid in message_ids:
        if mid in msgs:
            add("user", [TextBlock(text=msgs[mid].text)])

    last_step_at: datetime | None = steps[-1].created_at if steps else None
    tail = await _dynamic_tail(session, task, last_step_at)
    if tail:
        add("user", [TextBlock(text=tail)])
    system = [SystemBlock(text=SYSTEM_RULES, cache=True)]
    request = ModelRequest(system=system, messages=conversation, tools=[t.spec for t in tools])
    texts = [
        ("stable_prefix", SYSTEM_RULES),
        ("recent_messages", json.dumps([str(m) for m in conversation])[:20_000]),
        ("dynamic_tail", tail),
    ]
    layers: list[dict[str, Any]] = [
        {"name": n, "text": t, "tokens": estimate_tokens(t)} for n, t in texts
    ]
    return BuiltContext(request=request, layers=layers)


async def _dynamic_tail(session: AsyncSession, task: Task, since: datetime | None) -> str:
    lines = [f"[runtime] task {task.id} ({task.kind}), turn {task.turn}, language {task.language}"]
    orders = await session.scalars(
        select(GenerationOrder).where(GenerationOrder.task_id == task.id)
    )
    for o in orders:
        finished_after = since is None or _aware(o.updated_at) > _aware(since)
        if o.status == "succeeded" and o.object_id and finished_after:
            lines.append(f"[runtime] generation succeeded: order {o.id} → asset {o.object_id}")
        elif o.status == "failed" and finished_after:
            lines.append(f"[runtime] generation failed: order {o.id}: {o.error}")
        elif o.status not in ("succeeded", "failed"):
            lines.append(f"[runtime] waiting on order {o.id} ({o.status})")
    assets = await session.scalars(
        select(WorkObject)
        .where(WorkObject.user_id == task.user_id, WorkObject.type == "asset")
        .where(WorkObject.deleted.is_(False))
        .order_by(WorkObject.created_at.desc())
        .limit(5)
    )
    for a in assets:
        lines.append(f"[runtime] recent asset {a.id}: {a.name} ({a.created_at:%Y-%m-%d})")
    return "\n".join(lines) if len(lines) > 1 else ""


def _aware(dt: datetime) -> datetime:
    # SQLite returns naive datetimes even for timezone=True columns.
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _visible(result: dict[str, Any]) -> dict[str, Any]:
    """The journal's bookkeeping keys (leading underscore) are not for the model."""
    return {k: v for k, v in result.items() if not k.startswith("_")}

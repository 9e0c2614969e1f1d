"""The context builder: stable prefix first, dynamic tail last (ARCHITECTURE §2, article §6).

Layers, in the order the model sees them (the cache breakpoint sits after the stable
prefix, so everything before it is reused across steps):
  stable_prefix     system rules, the tool list, the person's profile snapshot
  segment_summaries older steps of this task, compressed to one line each
  recent_messages   the last steps verbatim (messages, decisions, tool results)
  dynamic_tail      task, checklist, cards, jobs, notices, retrieved memories
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from activities.checklist import load_items
from activities.toolkit import Tool
from llm.types import (
    Block,
    Message,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    TextBlock,
    ToolResultBlock,
)
from lomo.db.models import (
    Card,
    GenerationOrder,
    MessageRow,
    ModelStep,
    Task,
    ToolCall,
    WorkObject,
)

SYSTEM_RULES = (
    "You are Lomo, a creative agent working with one person over days. Answer in the "
    "language of the person's own messages. Use tools for every side effect; never claim an "
    "approval the person did not give: only the person's answer on a card approves. Keep "
    "the checklist current; a step is done only with evidence. Lines starting with "
    "[runtime] come from the platform, not from the person."
)
RECENT_STEPS = 12  # steps kept verbatim; older ones become one summary line each


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


@dataclass
class ContextExtras:
    """What other services add (memory, workspace notices); empty when they add nothing."""

    profile: str = ""
    memories: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    excluded_messages: set[str] = field(default_factory=set)
    excluded_steps: set[tuple[int, int]] = field(default_factory=set)


@dataclass
class BuiltContext:
    request: ModelRequest
    layers: list[dict[str, Any]]
    reported_orders: list[str] = field(default_factory=list)  # finished jobs shown now


async def build_context(
    session: AsyncSession,
    task: Task,
    turn: int,
    step: int,
    message_ids: list[str],
    tools: list[Tool],
    extras: ContextExtras | None = None,
) -> BuiltContext:
    extras = extras or ContextExtras()
    steps = [
        s
        for s in await session.scalars(
            select(ModelStep).where(ModelStep.task_id == task.id).order_by(ModelStep.id)
        )
        if (s.turn, s.step) not in extras.excluded_steps
    ]
    msgs = {
        m.id: m
        for m in await session.scalars(select(MessageRow).where(MessageRow.task_id == task.id))
        if m.id not in extras.excluded_messages
    }
    calls = {
        c.tool_use_id: c
        for c in await session.scalars(select(ToolCall).where(ToolCall.task_id == task.id))
    }
    older, recent = steps[:-RECENT_STEPS], steps[-RECENT_STEPS:]
    summary_lines = [_summarize(s, msgs, calls) for s in older]
    conversation: list[Message] = []

    def add(role: str, blocks: list[Block]) -> None:
        if conversation and conversation[-1].role == role:
            conversation[-1].content.extend(blocks)
        else:
            conversation.append(Message(role=role, content=list(blocks)))  # type: ignore[arg-type]

    if summary_lines:
        # The request that started the task stays verbatim (article §6.4: the task always
        # in view); the steps after it shrink to one line each.
        opening = "\n".join(m.text for m in _seen_in(msgs, older[0].turn, older[0].step))
        earlier = "[runtime] earlier in this task:\n" + "\n".join(summary_lines[1:])
        add("user", [TextBlock(text=opening or summary_lines[0]), TextBlock(text=earlier)])
    for s in recent:
        for m in _seen_in(msgs, s.turn, s.step):
            add("user", [TextBlock(text=m.text)])
        resp = ModelResponse.from_dict(s.response)
        add("assistant", list(resp.content))
        results: list[Block] = []
        for tu in resp.tool_uses:
            call = calls.get(tu.id)
            shown = _visible(call.result) if call and call.result else {"status": "missing"}
            results.append(ToolResultBlock(tool_use_id=tu.id, content=json.dumps(shown)))
        if results:
            add("user", results)
    for mid in message_ids:
        if mid in msgs:
            add("user", [TextBlock(text=msgs[mid].text)])

    since = steps[-1].created_at if steps else None
    # A finished job is shown until a stored step has seen it (not "since the last step":
    # a fast job can finish before the step that submitted it is even stored).
    reported = {o for s in steps for o in s.context.get("reported_orders", [])}
    tail, reported_now = await _dynamic_tail(session, task, since, reported, extras)
    add("user", [TextBlock(text=tail)])
    prefix = SYSTEM_RULES + "\nTools: " + ", ".join(t.name for t in tools)
    system = [SystemBlock(text=prefix, cache=not extras.profile)]
    if extras.profile:
        system.append(SystemBlock(text=extras.profile, cache=True))
    request = ModelRequest(system=system, messages=conversation, tools=[t.spec for t in tools])
    recent_text = "\n".join(_render(m) for m in conversation[:-1] or conversation)
    texts = [
        ("stable_prefix", prefix + ("\n" + extras.profile if extras.profile else "")),
        ("segment_summaries", "\n".join(summary_lines)),
        ("recent_messages", recent_text),
        ("dynamic_tail", tail),
    ]
    layers: list[dict[str, Any]] = [
        {"name": n, "text": t, "tokens": estimate_tokens(t)} for n, t in texts
    ]
    return BuiltContext(request=request, layers=layers, reported_orders=reported_now)


def _seen_in(msgs: dict[str, MessageRow], turn: int, step: int) -> list[MessageRow]:
    seen = [m for m in msgs.values() if (m.processed_turn, m.processed_step) == (turn, step)]
    return sorted(seen, key=lambda m: m.created_at)


def _summarize(s: ModelStep, msgs: dict[str, MessageRow], calls: dict[str, ToolCall]) -> str:
    resp = ModelResponse.from_dict(s.response)
    said = " ".join(m.text for m in _seen_in(msgs, s.turn, s.step))
    parts = [f"turn {s.turn} step {s.step}:"]
    if said:
        parts.append(f"person said {said[:160]!r};")
    for tu in resp.tool_uses:
        call = calls.get(tu.id)
        status = call.status if call else "missing"
        parts.append(f"{tu.name} → {status};")
    if resp.text:
        parts.append(f"replied {resp.text[:160]!r}")
    return " ".join(parts)


def _render(m: Message) -> str:
    out = []
    for b in m.content:
        if isinstance(b, TextBlock):
            out.append(f"{m.role}: {b.text}")
        elif isinstance(b, ToolResultBlock):
            out.append(f"tool_result: {b.content}")
        else:
            out.append(f"tool_use: {b.name} {json.dumps(b.input)}")
    return "\n".join(out)


async def _dynamic_tail(
    session: AsyncSession,
    task: Task,
    since: datetime | None,
    reported: set[str],
    extras: ContextExtras,
) -> tuple[str, list[str]]:
    lines = [
        f"[runtime] task {task.id} ({task.kind}), turn {task.turn}, language {task.language}",
        f"[runtime] goal: {task.goal[:500]}",
    ]
    if task.briefing:
        lines.append(f"[runtime] briefing: {task.briefing[:2000]}")
    items = await load_items(session, task.id)
    if items:
        lines.append("[runtime] checklist:")
        for i in items:
            flag = " (needs the person's confirmation)" if i.requires_confirmation else ""
            arts = f" artifacts {', '.join(i.artifacts)}" if i.artifacts else ""
            lines.append(f"  - [{i.status}] {i.id}: {i.title}{flag}{arts}")
    cards = await session.scalars(select(Card).where(Card.task_id == task.id))
    for c in cards:
        if c.status == "open":
            lines.append(f"[runtime] waiting for the person on card {c.id} ({c.kind}): {c.title}")
        elif c.status == "answered" and _after(c.answered_at, since):
            a = c.answer or {}
            choice = f" option {a.get('option_id')}" if a.get("option_id") else ""
            text = f": {a.get('text')}" if a.get("text") else ""
            lines.append(
                f"[runtime] the person answered card {c.id} ({c.title}): "
                f"{a.get('action')}{choice}{text}"
            )
    orders = await session.scalars(
        select(GenerationOrder).where(GenerationOrder.task_id == task.id)
    )
    shown: list[str] = []
    # With a checklist, a finished result stays in view until a step carries it; without
    # one, until a stored step has seen it.
    attached = {a for i in items for a in i.artifacts}
    for o in orders:
        unseen = o.id not in reported or (bool(items) and o.object_id not in attached)
        if o.status == "succeeded" and o.object_id and unseen:
            lines.append(f"[runtime] generation succeeded: order {o.id} → asset {o.object_id}")
            shown.append(o.id)
        elif o.status == "failed" and o.id not in reported:
            lines.append(f"[runtime] generation failed: order {o.id}: {o.error}")
            shown.append(o.id)
        elif o.status not in ("succeeded", "failed"):
            lines.append(f"[runtime] waiting on order {o.id} ({o.status})")
    assets = await session.scalars(
        select(WorkObject)
        .where(WorkObject.user_id == task.user_id, WorkObject.type == "asset")
        .where(WorkObject.deleted.is_(False))
        .order_by(WorkObject.created_at.desc())
        .limit(5)
    )
    for obj in assets:
        lines.append(f"[runtime] recent asset {obj.id}: {obj.name} ({obj.created_at:%Y-%m-%d})")
    lines.extend(f"[runtime] change notice: {n}" for n in extras.notices)
    lines.extend(f"[runtime] memory: {m}" for m in extras.memories)
    lines.extend(f"[runtime] degraded: {d}" for d in extras.degraded)
    return "\n".join(lines), shown


def _after(t: datetime | None, since: datetime | None) -> bool:
    if t is None:
        return False
    return since is None or _aware(t) > _aware(since)


def _aware(dt: datetime) -> datetime:
    # SQLite returns naive datetimes even for timezone=True columns.
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _visible(result: dict[str, Any]) -> dict[str, Any]:
    """The journal's bookkeeping keys (leading underscore) are not for the model."""
    return {k: v for k, v in result.items() if not k.startswith("_")}

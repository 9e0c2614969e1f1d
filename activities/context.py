"""The context builder: stable prefix first, dynamic tail last (ARCHITECTURE §2, article §6).

Layers, in the order the API reads them (tools, system, messages), with cache breakpoints:
  stable_prefix     the core tools (breakpoint 1), system rules and the profile snapshot
                    (breakpoint 2; the loaded domains' tools sit between the two, so a
                    domain load never changes a byte before breakpoint 1)
  segment_summaries the opening request verbatim, then one summary per closed segment,
                    appended, never rewritten (breakpoint 3)
  recent_messages   the steps of the open segments verbatim (breakpoint 4 after the last)
  dynamic_tail      task, checklist, cards, jobs, notices, retrieved memories
Each step records fingerprints of these parts, and why the stable prefix changed against
the previous step (a domain load, a profile version), so an unexplained change is visible.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from activities.checklist import load_items
from activities.context_tools import loaded_domains, tools_text, visible_tools
from activities.segments import ContextPolicy, seen_in, step_line
from activities.toolkit import Tool
from flows.graph import run_of_call
from flows.runs import progress_lines
from llm.types import (
    Block,
    Message,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
)
from lomo.db.context import ContextSegment
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


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _sha(parts: list[Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class ContextExtras:
    """What other services add (memory, workspace notices); empty when they add nothing."""

    profile: str = ""
    profile_version: int = 0
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
    prefix: dict[str, Any] = field(default_factory=dict)  # fingerprints and change reasons


async def build_context(
    session: AsyncSession,
    task: Task,
    turn: int,
    step: int,
    message_ids: list[str],
    tools: dict[str, Tool],
    extras: ContextExtras | None = None,
    policy: ContextPolicy | None = None,
) -> BuiltContext:
    extras = extras or ContextExtras()
    policy = policy or ContextPolicy()
    all_steps = list(
        await session.scalars(
            select(ModelStep).where(ModelStep.task_id == task.id).order_by(ModelStep.id)
        )
    )
    msgs = {
        m.id: m
        for m in await session.scalars(select(MessageRow).where(MessageRow.task_id == task.id))
        if m.id not in extras.excluded_messages
    }
    call_rows = list(await session.scalars(select(ToolCall).where(ToolCall.task_id == task.id)))
    calls = {c.tool_use_id: c for c in call_rows}
    summaries = {
        seg.segment: seg
        for seg in await session.scalars(
            select(ContextSegment).where(
                ContextSegment.task_id == task.id, ContextSegment.status == "active"
            )
        )
    }
    conversation: list[Message] = []

    def add(role: str, blocks: list[Block]) -> None:
        if conversation and conversation[-1].role == role:
            conversation[-1].content.extend(blocks)
        else:
            conversation.append(Message(role=role, content=list(blocks)))  # type: ignore[arg-type]

    def point() -> list[int]:
        return [len(conversation) - 1, len(conversation[-1].content) - 1]

    def kept(steps: list[ModelStep]) -> list[ModelStep]:
        return [s for s in steps if (s.turn, s.step) not in extras.excluded_steps]

    size = policy.segment_steps
    closed = policy.closed(len(all_steps))
    summary_texts: list[str] = []
    cache_points: list[list[int]] = []
    if closed:
        # The request that started the task stays verbatim (article §6.4: the task always
        # in view); each closed segment follows as one summary, appended in order.
        first = all_steps[0]
        opening = [TextBlock(text=m.text) for m in seen_in(msgs, first.turn, first.step)]
        for k in range(closed):
            seg_steps = all_steps[k * size : (k + 1) * size]
            row = summaries.get(k)
            if row is not None and kept(seg_steps) == seg_steps:
                text = row.text
            else:  # not written yet, or forgetting touched it: one line per kept step
                text = "\n".join(step_line(s, msgs, calls) for s in kept(seg_steps)) or "-"
            summary_texts.append(
                f"[runtime] summary of steps {k * size + 1}–{(k + 1) * size}: {text}"
            )
        add("user", [*opening, *(TextBlock(text=t) for t in summary_texts)])
        cache_points.append(point())
    for s in kept(all_steps[closed * size :]):
        for m in seen_in(msgs, s.turn, s.step):
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
    history = [b for m in conversation for b in m.content]
    # The steps after the summaries (the opening and summaries are their own layer).
    recent_text = "\n".join(_render(m) for m in conversation[1 if closed else 0 :])
    if conversation and point() not in cache_points:
        cache_points.append(point())  # the end of what the next step repeats byte for byte

    since = all_steps[-1].created_at if all_steps else None
    # A finished job is shown until a stored step has seen it (not "since the last step":
    # a fast job can finish before the step that submitted it is even stored).
    reported = {o for s in all_steps for o in s.context.get("reported_orders", [])}
    tail, reported_now = await _dynamic_tail(session, task, since, reported, extras)
    add("user", [TextBlock(text=tail)])

    domains = loaded_domains(call_rows, tools)
    specs = visible_tools(tools, domains)
    rules = SYSTEM_RULES + "\n" + tools_text(tools)
    system = [SystemBlock(text=rules, cache=not extras.profile)]
    if extras.profile:
        system.append(SystemBlock(text=extras.profile, cache=True))
    request = ModelRequest(
        system=system, messages=conversation, tools=specs, cache_points=cache_points
    )
    core = [_spec_dict(t) for t in specs if tools[t.name].domain == "core"]
    loaded = [_spec_dict(t) for t in specs if tools[t.name].domain != "core"]
    history_dicts = [asdict(b) for b in history]
    prefix = {
        "core_sha": _sha(core),
        "stable_sha": _sha([core, loaded, rules, extras.profile]),
        "summaries_sha": _sha(history_dicts[: cache_points[0][1] + 1] if closed else []),
        "history_blocks": len(history_dicts),
        "history_sha": _sha(history_dicts),
        "domains": domains,
        "profile_version": extras.profile_version,
        "core_tool_tokens": estimate_tokens(json.dumps(core)),
        "loaded_tool_tokens": estimate_tokens(json.dumps(loaded)) if loaded else 0,
    }
    prev = all_steps[-1].context.get("prefix") if all_steps else None
    cached = _compare(prefix, prev, history_dicts)
    texts = [
        (
            "stable_prefix",
            json.dumps(core) + "\n" + rules + ("\n" + extras.profile if extras.profile else ""),
        ),
        ("loaded_tools", json.dumps(loaded) if loaded else ""),
        ("segment_summaries", "\n".join(summary_texts)),
        ("recent_messages", recent_text),
        ("dynamic_tail", tail),
    ]
    layers: list[dict[str, Any]] = [
        {"name": n, "text": t, "tokens": estimate_tokens(t) if t else 0, "cached": cached[n]}
        for n, t in texts
    ]
    return BuiltContext(request, layers, reported_now, prefix)


def _spec_dict(t: ToolSpec) -> dict[str, Any]:
    return {"name": t.name, "description": t.description, "input_schema": t.input_schema}


def _compare(
    now: dict[str, Any], prev: dict[str, Any] | None, history: list[dict[str, Any]]
) -> dict[str, Any]:
    """Which layers repeat the previous step's bytes (what the prompt cache can serve), and
    why the stable prefix changed. Sets now["changes"] (empty: unchanged)."""
    now["changes"] = []
    if prev is None:
        return dict.fromkeys(
            (
                "stable_prefix",
                "loaded_tools",
                "segment_summaries",
                "recent_messages",
                "dynamic_tail",
            ),
            False,
        )
    if now["core_sha"] != prev.get("core_sha"):
        now["changes"].append("core tools changed (a new worker version)")
    if now["stable_sha"] != prev.get("stable_sha"):
        added = [d for d in now["domains"] if d not in prev.get("domains", [])]
        if added:
            now["changes"].append("domain load: " + ", ".join(added))
        if now["profile_version"] != prev.get("profile_version"):
            now["changes"].append(
                f"profile v{prev.get('profile_version')} → v{now['profile_version']}"
            )
        if not added and now["profile_version"] == prev.get("profile_version"):
            now["changes"].append("unexplained")
    stable = now["stable_sha"] == prev.get("stable_sha")
    summaries = stable and now["summaries_sha"] == prev.get("summaries_sha")
    k = int(prev.get("history_blocks", 0))
    repeated = summaries and k > 0 and _sha(history[:k]) == prev.get("history_sha")
    return {
        "stable_prefix": now["core_sha"] == prev.get("core_sha") and stable,
        "loaded_tools": stable and bool(now["domains"]),
        "segment_summaries": summaries,
        # The history up to the previous step is read; what this step added is written.
        "recent_messages": "partly" if repeated else False,
        "dynamic_tail": False,
    }


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
        if run_of_call(o.idempotency_key):
            continue  # a flow node's order: its run's progress line speaks for it
        unseen = o.id not in reported or (bool(items) and o.object_id not in attached)
        if o.status == "succeeded" and o.object_id and unseen:
            lines.append(f"[runtime] generation succeeded: order {o.id} → asset {o.object_id}")
            shown.append(o.id)
        elif o.status == "failed" and o.id not in reported:
            lines.append(f"[runtime] generation failed: order {o.id}: {o.error}")
            shown.append(o.id)
        elif o.status != "failed" and not o.object_id:
            # Succeeded but its asset not stored yet: still a job the task waits on (the
            # workflow collects it), never invisible, or the model would order it again.
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
    lines.extend(f"[runtime] {line}" for line in await progress_lines(session, task.id))
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

"""The context builder: stable prefix first, dynamic tail last (ARCHITECTURE §2, article §6).

Layers, in the order the API reads them (tools, system, messages), with cache breakpoints
(at most four):
  stable_prefix     the core tools, every domain's tools sent deferred (not in the prompt
                    until loaded), the system rules (breakpoint 1: long enough to be cached
                    alone) and the profile snapshot (breakpoint 2), then the task's fixed
                    lines (id, kind, language, goal, briefing), cached with what follows
  segment_summaries the opening request verbatim, then one summary per closed segment with
                    the profile additions of its steps, appended, never rewritten
                    (breakpoint 3); then the runtime's loads of the domains carried over
  recent_messages   the steps of the open segments verbatim, with domain loads (tool
                    references the API expands in place) and profile additions where they
                    happened (breakpoint 4 after the last)
  dynamic_tail      the turn (at a turn's first step), checklist, cards, jobs, notices,
                    retrieved memories; nothing at all when none of these is there
A domain load or a profile addition appends; a segment close appends its summary and
rewrites only the verbatim steps after it, which is where unused domains are unloaded. Each
step records fingerprints of these parts, why the bytes before the history changed (a
profile correction, new tool definitions) and what was appended, so an unexplained change
is visible.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from context.prefix import compare_prefix, profile_layout
from context.prefix import sha as _sha
from context.segments import ContextPolicy, step_line
from context.tail import dynamic_tail, tail_reads, task_header, visible_result
from journal.rows import (
    CallRow,
    MessageWindow,
    MsgRow,
    StepRow,
    TaskLike,
    body,
    calls_by_step,
    journal_reads,
    load_messages,
    load_steps,
    load_window,
    messages_read,
    window_reads,
)
from llm.types import (
    Block,
    Message,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from lomo.db.context import ContextSegment
from lomo.db.hot import Bound, HotQuery, prefetched
from lomo.db.models import ModelStep
from tools.base import Tool
from tools.context import (
    DOMAINS,
    domain_tool_names,
    loaded_domains,
    request_tools,
    tools_text,
)

SYSTEM_RULES = (
    "You are Lomo, a creative agent working with one person over days. Answer in the "
    "language of the person's own messages. Use tools for every side effect; never claim an "
    "approval the person did not give: only the person's answer on a card approves. Keep "
    "the checklist current; a step is done only with evidence. Lines starting with "
    "[runtime] come from the platform, not from the person."
)


# The last step's prefix record, by its id (ordering the task's steps by id and taking the
# first made Postgres parse every step's stored context before sorting); the id found by
# the query itself, so it is read together with the steps.
_PREFIX = HotQuery(
    select(ModelStep.context["prefix"]).where(
        ModelStep.id
        == select(func.max(ModelStep.id))
        .where(ModelStep.task_id == bindparam("task_id"))
        .scalar_subquery()
    )
)
_SUMMARIES = HotQuery(
    select(
        ContextSegment.segment,
        ContextSegment.first_step,
        ContextSegment.last_step,
        ContextSegment.text,
    ).where(ContextSegment.task_id == bindparam("task_id"), ContextSegment.status == "active")
)


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


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
    visible_tools: list[str] = field(default_factory=list)  # core and loaded, not deferred
    steps_before: int = 0  # the task's stored steps when this context was built


def context_reads(task_id: str, user_id: str) -> list[Bound]:
    """The reads `build_context` starts with (none depends on another), for the model step
    to prefetch together with its own (lomo/db/hot.py `prefetched`)."""
    return [
        *journal_reads(task_id),
        _PREFIX.bind(task_id=task_id),
        _SUMMARIES.bind(task_id=task_id),
        *tail_reads(task_id, user_id),
    ]


async def build_context(
    session: AsyncSession,
    task: TaskLike,
    turn: int,
    step: int,
    message_ids: list[str],
    tools: dict[str, Tool],
    extras: ContextExtras | None = None,
    policy: ContextPolicy | None = None,
    late: Callable[[ContextExtras], Awaitable[None]] | None = None,
) -> BuiltContext:
    """The model's request for this step. `late` completes `extras` once the context's own
    reads are back: a slower source (memory's search) runs while they travel."""
    extras = extras or ContextExtras()
    policy = policy or ContextPolicy()
    # Plain rows, no ORM objects (context_rows.py); bodies only for the steps shown in full.
    all_steps = await load_steps(session, task.id)
    got = await _PREFIX.first(session, task_id=task.id)
    prev = got[0] if got else None
    # A summary written under another segment size covers other steps: not used (its
    # segment shows one line per step instead).
    seg_size = policy.segment_steps
    summaries = {
        segment: text
        for segment, first, last, text in await _SUMMARIES.rows(session, task_id=task.id)
        if (first, last) == (segment * seg_size, (segment + 1) * seg_size - 1)
    }
    conversation: list[Message] = []

    def add(role: str, blocks: list[Block]) -> None:
        if conversation and conversation[-1].role == role:
            conversation[-1].content.extend(blocks)
        else:
            conversation.append(Message(role=role, content=list(blocks)))  # type: ignore[arg-type]

    def point() -> list[int]:
        return [len(conversation) - 1, len(conversation[-1].content) - 1]

    def kept(steps: list[StepRow]) -> list[StepRow]:
        return [s for s in steps if (s.turn, s.step) not in extras.excluded_steps]

    size = policy.segment_steps
    closed = policy.closed(len(all_steps))
    boundary = closed * size
    n_now = len(all_steps)
    need = set(range(max(0, boundary - size), n_now))
    for k in range(closed):
        seg = all_steps[k * size : (k + 1) * size]
        if summaries.get(k) is None or kept(seg) != seg:
            need.update(range(k * size, min((k + 1) * size, n_now)))
    # Only the messages shown: the opening request, those of the steps shown in full or as
    # lines, and this step's (a long task's other messages are in its summaries).
    window = MessageWindow(
        from_turn=min((all_steps[i].turn for i in need), default=None),
        opening=(all_steps[0].turn, all_steps[0].step) if all_steps else None,
        ids=message_ids,
    )
    in_full = [all_steps[i] for i in sorted(need)]
    # The messages, the bodies and the calls of the steps shown in one round trip (every use
    # of a call below is of a step in `need`: the history, the lines of a segment without
    # its summary, the domains carried over the boundary).
    async with prefetched(session, messages_read(task.id, window), *window_reads(task.id, in_full)):
        msgs = await load_messages(session, task.id, extras.excluded_messages, window)
        call_rows = await load_window(session, task.id, in_full)
    calls = {c.tool_use_id: c for c in call_rows}
    by_step = calls_by_step(call_rows)
    if late is not None:
        await late(extras)
    # Each step's messages, found once (looking them up per step was quadratic).
    msgs_at: dict[tuple[int | None, int | None], list[MsgRow]] = {}
    for m in sorted(msgs.values(), key=lambda m: m.created_at):
        msgs_at.setdefault((m.processed_turn, m.processed_step), []).append(m)
    profile = profile_layout(prev, extras, n_now)

    def step_calls(steps: list[StepRow]) -> list[CallRow]:
        return [c for st in steps for c in by_step.get((st.turn, st.step), [])]

    # Domains carried over the compression boundary: those used in the segment that closed
    # or in the steps still verbatim when it closed (fixed until the next close); a domain
    # not used there is unloaded, its tool definitions leave the context with its load.
    carried = (
        _in_domain_order(
            loaded_domains(
                step_calls(kept(all_steps[boundary - size : boundary + policy.recent_steps])),
                tools,
            )
        )
        if closed
        else []
    )
    summary_texts: list[str] = []
    cache_points: list[list[int]] = []
    summaries_sha = _sha([])
    if closed:
        # The request that started the task stays verbatim (article §6.4: the task always
        # in view); each closed segment follows as one summary, appended in order, with the
        # profile additions of its steps after it: a close only appends to this message.
        first = all_steps[0]
        opening = [TextBlock(text=m.text) for m in msgs_at.get((first.turn, first.step), [])]
        blocks: list[Block] = list(opening)
        for k in range(closed):
            seg_steps = all_steps[k * size : (k + 1) * size]
            summary = summaries.get(k)
            if summary is not None and kept(seg_steps) == seg_steps:
                text = summary
            else:  # not written yet, or forgetting touched it: one line per kept step
                text = "\n".join(step_line(s, msgs, calls) for s in kept(seg_steps)) or "-"
            summary_texts.append(
                f"[runtime] summary of steps {k * size + 1}–{(k + 1) * size}: {text}"
            )
            blocks.append(TextBlock(text=summary_texts[-1]))
            blocks.extend(
                TextBlock(text=t) for at, t in profile.notes if k * size <= at < (k + 1) * size
            )
        add("user", blocks)
        cache_points.append(point())
        summaries_sha = _sha([_fields(b) for b in conversation[0].content])
        if carried:  # the runtime keeps them loaded: one load per carried domain
            add(
                "assistant",
                [
                    ToolUseBlock(
                        id=f"toolu_keep_{closed}_{d}", name="load_tools", input={"domain": d}
                    )
                    for d in carried
                ],
            )
            add(
                "user",
                [
                    ToolResultBlock(
                        tool_use_id=f"toolu_keep_{closed}_{d}",
                        content="",
                        tool_refs=domain_tool_names(tools, d),
                    )
                    for d in carried
                ],
            )
    visible = list(carried)
    for i, s in enumerate(all_steps[boundary:], start=boundary):
        for at, t in profile.notes:
            if at == i:
                add("user", [TextBlock(text=t)])
        if (s.turn, s.step) in extras.excluded_steps:
            continue
        for m in msgs_at.get((s.turn, s.step), []):
            add("user", [TextBlock(text=m.text)])
        resp = ModelResponse.from_dict(body(s))
        add("assistant", list(resp.content))
        results: list[Block] = []
        implicit: list[str] = []
        for tu in resp.tool_uses:
            call = calls.get(tu.id)
            shown = visible_result(call.result) if call and call.result else {"status": "missing"}
            loads = loaded_domains([call], tools) if call else []
            new = [d for d in loads if d not in visible]
            visible.extend(new)
            if tu.name == "load_tools" and new:
                refs = [n for d in new for n in domain_tool_names(tools, d)]
                results.append(ToolResultBlock(tool_use_id=tu.id, content="", tool_refs=refs))
                continue
            implicit.extend(new)  # a domain tool called unloaded: loaded from now on
            results.append(ToolResultBlock(tool_use_id=tu.id, content=json.dumps(shown)))
        if results:
            add("user", results)
        if implicit:
            uses = [
                ToolUseBlock(
                    id=f"toolu_load_{s.turn}_{s.step}_{d}", name="load_tools", input={"domain": d}
                )
                for d in implicit
            ]
            add("assistant", list(uses))
            add(
                "user",
                [
                    ToolResultBlock(
                        tool_use_id=u.id, content="", tool_refs=domain_tool_names(tools, d)
                    )
                    for u, d in zip(uses, implicit, strict=True)
                ],
            )
    for at, t in profile.notes:
        if at == n_now:
            add("user", [TextBlock(text=t)])
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
    reported = {o for st in all_steps for o in st.reported_orders or []}
    # The turn line is news only at a turn's first step (or when nothing else would close
    # the request with a user message); an empty tail sends nothing after the history.
    status = not all_steps or all_steps[-1].turn != task.turn
    status = status or not conversation or conversation[-1].role != "user"
    tail, reported_now = await dynamic_tail(session, task, since, reported, extras, status)
    if tail:
        add("user", [TextBlock(text=tail)])

    specs = request_tools(tools)
    rules = SYSTEM_RULES + "\n" + tools_text(tools)
    # Breakpoints (at most four): after the core tools and the rules (one prefix long
    # enough to be cached on its own), after the profile snapshot, after the summaries,
    # after the history.
    system = [SystemBlock(text=rules, cache=True)]
    if profile.base_text:
        system.append(SystemBlock(text=profile.base_text, cache=True))
    # The task's own fixed lines (id, kind, language, goal, briefing) follow the profile:
    # cached with everything after them instead of sent again after the last breakpoint at
    # every step; the dynamic tail keeps only what changes between steps.
    header = task_header(task)
    system.append(SystemBlock(text=header))
    request = ModelRequest(
        system=system, messages=conversation, tools=specs, cache_points=cache_points
    )
    core = [_spec_dict(t) for t in specs if not t.deferred]
    deferred = [_spec_dict(t) for t in specs if t.deferred]
    loaded = [_spec_dict(t) for d in visible for t in specs if tools[t.name].domain == d]
    history_dicts = [_fields(b) for b in history]
    prefix = {
        "core_sha": _sha([core, deferred]),
        "stable_sha": _sha([core, deferred, rules, profile.base_text, header]),
        "task_sha": _sha([header]),
        "summaries_sha": summaries_sha,
        "history_blocks": len(history_dicts),
        "history_sha": _sha(history_dicts),
        "domains": visible,
        "carried": carried,
        "profile_version": extras.profile_version,
        "profile_state": profile.state,
        "core_tool_tokens": estimate_tokens(json.dumps(core)),
        "loaded_tool_tokens": estimate_tokens(json.dumps(loaded)) if loaded else 0,
    }
    cached = compare_prefix(prefix, prev, history_dicts, profile.appended)
    texts = [
        (
            "stable_prefix",
            json.dumps(core)
            + "\n"
            + rules
            + ("\n" + profile.base_text if profile.base_text else "")
            + "\n"
            + header,
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
    names = [t.name for t in specs if not t.deferred]
    names += [t.name for d in visible for t in specs if tools[t.name].domain == d]
    return BuiltContext(request, layers, reported_now, prefix, names, n_now)


def _fields(block: Block) -> dict[str, Any]:
    """A block's fields for its fingerprint. Blocks are flat, so a shallow copy hashes to the
    same JSON as `asdict`, which deep-copies every value (a few ms per step on a long
    history, issue 14); nothing here changes the values."""
    return dict(vars(block))


def _spec_dict(t: ToolSpec) -> dict[str, Any]:
    return {"name": t.name, "description": t.description, "input_schema": t.input_schema}


def _in_domain_order(domains: list[str]) -> list[str]:
    rank = {d: i for i, d in enumerate(DOMAINS)}
    return sorted(domains, key=lambda d: (rank.get(d, len(rank)), d))


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

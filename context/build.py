"""The context builder: stable prefix first, dynamic tail last (docs/architecture.md#context).

Layers, in the order the API reads them (tools, system, messages), with cache breakpoints
(at most four):
  stable_prefix     the core tools, every domain's tools sent deferred (not in the prompt
                    until loaded), the system rules (breakpoint 1: long enough to be cached
                    alone) and the profile snapshot (breakpoint 2), then the task's fixed
                    lines (id, kind, language, goal, briefing), cached with what follows
  segment_summaries the opening request verbatim, then one summary per closed segment with
                    the profile additions of its steps, appended, never rewritten
                    (breakpoint 3); then the runtime's loads of the domains and the
                    creative guides carried over
  recent_messages   the steps of the open segments verbatim, with domain loads (tool
                    references the API expands in place), guide loads and profile additions
                    where they happened (breakpoint 4 after the last)
  dynamic_tail      the turn (at a turn's first step), checklist, cards, jobs, notices,
                    retrieved memories; nothing at all when none of these is there
A domain or guide load or a profile addition appends; a segment close appends its summary
and rewrites only the verbatim steps after it, which is where unused domains and guides are
unloaded. Each
step records fingerprints of these parts, why the bytes before the history changed (a
profile correction, new tool definitions) and what was appended, so an unexplained change
is visible.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from context.guides import GUIDES, carried_guides, guide_block, guides_text, with_domains
from context.pictures import shown_images, tail_blocks, with_attachments
from context.prefix import ProfileLayout, compare_prefix, profile_layout, sha
from context.segments import ContextPolicy, step_line
from context.tail import dynamic_tail, task_header, visible_result
from context.tools import (
    DOMAINS,
    ToolLike,
    domain_tool_names,
    loaded_domains,
    request_tools,
    tools_text,
)
from context.types import CallRow, MsgRow, Recalled, StepData, StepRow, body, call_order
from llm.types import (
    Block,
    ImageBlock,
    Message,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)

SYSTEM_RULES = (
    "You are Lomo, a creative agent working with one person over days. Answer in the "
    "language of the person's own messages. Use tools for every side effect; never claim an "
    "approval the person did not give: only the person's answer on a card approves. Keep "
    "the checklist current; a step is done only with evidence. Lines starting with "
    "[runtime] come from the platform, not from the person."
)
Tools = Mapping[str, ToolLike]


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


@dataclass
class BuiltContext:
    request: ModelRequest
    layers: list[dict[str, Any]]
    reported_orders: list[str] = field(default_factory=list)  # finished jobs shown now
    prefix: dict[str, Any] = field(default_factory=dict)  # fingerprints and change reasons
    visible_tools: list[str] = field(default_factory=list)  # core and loaded, not deferred
    steps_before: int = 0  # the task's stored steps when this context was built


class _Conversation:
    """The messages being built: consecutive blocks of one role share a message."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.cache_points: list[list[int]] = []

    def add(self, role: str, blocks: list[Block]) -> None:
        if self.messages and self.messages[-1].role == role:
            self.messages[-1].content.extend(blocks)
        else:
            self.messages.append(Message(role=role, content=list(blocks)))  # type: ignore[arg-type]

    def point(self) -> list[int]:
        return [len(self.messages) - 1, len(self.messages[-1].content) - 1]

    def load(self, ids: list[str], domains: list[str], tools: Tools) -> None:
        """The runtime's own `load_tools` calls: a tool use each, answered with references
        to the domain's tools (the API expands them in place)."""
        uses = [
            ToolUseBlock(id=i, name="load_tools", input={"domain": d})
            for i, d in zip(ids, domains, strict=True)
        ]
        self.add("assistant", list(uses))
        refs = [domain_tool_names(tools, d) for d in domains]
        self.add(
            "user",
            [
                ToolResultBlock(tool_use_id=u.id, content="", tool_refs=r)
                for u, r in zip(uses, refs, strict=True)
            ],
        )


@dataclass
class _History:
    """The task's journal arranged for the builder."""

    data: StepData
    policy: ContextPolicy
    profile: ProfileLayout
    calls: dict[str, CallRow]
    by_step: dict[tuple[int, int], list[CallRow]]
    msgs_at: dict[tuple[int | None, int | None], list[MsgRow]]

    @property
    def closed(self) -> int:
        return self.policy.closed(len(self.data.steps))

    @property
    def boundary(self) -> int:
        return self.closed * self.policy.segment_steps

    def kept(self, steps: list[StepRow]) -> list[StepRow]:
        return [s for s in steps if (s.turn, s.step) not in self.data.excluded_steps]

    def segment(self, k: int) -> list[StepRow]:
        size = self.policy.segment_steps
        return self.data.steps[k * size : (k + 1) * size]


def _arrange(data: StepData, policy: ContextPolicy) -> _History:
    by_step: dict[tuple[int, int], list[CallRow]] = {}
    for c in data.calls:
        by_step.setdefault(call_order(c.call_id)[:2], []).append(c)
    # Each step's messages, found once (looking them up per step is quadratic).
    msgs_at: dict[tuple[int | None, int | None], list[MsgRow]] = {}
    for m in sorted(data.messages.values(), key=lambda m: m.created_at):
        msgs_at.setdefault((m.processed_turn, m.processed_step), []).append(m)
    return _History(
        data,
        policy,
        profile_layout(data.prev_prefix, data.profile, len(data.steps)),
        {c.tool_use_id: c for c in data.calls},
        by_step,
        msgs_at,
    )


def build_context(
    data: StepData, tools: Tools, policy: ContextPolicy, recalled: Recalled | None = None
) -> BuiltContext:
    """The model's request for this step, with the layers' texts and fingerprints."""
    h = _arrange(data, policy)
    conv = _Conversation()
    carried = _carried_domains(h, tools)
    kept_guides = _carried_guides(h, carried) if "load_guide" in tools else []
    summary_texts, summaries_sha = _summaries(conv, h)
    if carried:  # the runtime keeps them loaded: one load per carried domain
        conv.load([f"toolu_keep_{h.closed}_{d}" for d in carried], carried, tools)
    if kept_guides:  # after the carried loads: the summaries' breakpoint stays where it was
        conv.add("user", [TextBlock(text=guide_block(GUIDES[n])) for n in kept_guides])
    seen = _Visible(list(carried), list(kept_guides))
    _recent_steps(conv, h, tools, seen)
    visible = seen.domains
    history = [b for m in conv.messages for b in m.content]
    # The steps after the summaries (the opening and summaries are their own layer).
    recent_text = "\n".join(_render(m) for m in conv.messages[1 if h.closed else 0 :])
    if conv.messages and conv.point() not in conv.cache_points:
        conv.cache_points.append(conv.point())  # the end of what the next step repeats
    tail, reported_now = _tail(conv, data, recalled or Recalled())
    in_history = shown_images(history)
    looked_at = tail_blocks(data, {str(i["object_id"]) for i in in_history})
    if looked_at:
        conv.add("user", looked_at)
    specs = request_tools(tools)
    rules = SYSTEM_RULES + "\n" + tools_text(tools)
    if "load_guide" in tools:
        rules += "\n" + guides_text(GUIDES)
    header = task_header(data.task)
    request = ModelRequest(
        system=_system(rules, h.profile.base_text, header),
        messages=conv.messages,
        tools=specs,
        cache_points=conv.cache_points,
    )
    core = [_spec_dict(t) for t in specs if not t.deferred]
    deferred = [_spec_dict(t) for t in specs if t.deferred]
    loaded = [_spec_dict(t) for d in visible for t in specs if tools[t.name].domain == d]
    history_dicts = [_fields(b) for b in history]
    prefix = {
        "core_sha": sha([core, deferred]),
        "stable_sha": sha([core, deferred, rules, h.profile.base_text, header]),
        "task_sha": sha([header]),
        "summaries_sha": summaries_sha,
        "history_blocks": len(history_dicts),
        "history_sha": sha(history_dicts),
        "domains": visible,
        "carried": carried,
        "guides": seen.guides,
        "carried_guides": kept_guides,
        "guide_tokens": {n: estimate_tokens(GUIDES[n].text) for n in seen.guides if n in GUIDES},
        "closed": h.closed,
        "profile_version": data.profile.version,
        "profile_state": h.profile.state,
        "core_tool_tokens": estimate_tokens(json.dumps(core)),
        "loaded_tool_tokens": estimate_tokens(json.dumps(loaded)) if loaded else 0,
    }
    cached = compare_prefix(prefix, data.prev_prefix, history_dicts, h.profile.appended)
    stable = json.dumps(core) + "\n" + rules
    stable += ("\n" + h.profile.base_text if h.profile.base_text else "") + "\n" + header
    texts = [
        ("stable_prefix", stable),
        ("loaded_tools", json.dumps(loaded) if loaded else ""),
        ("segment_summaries", "\n".join(summary_texts)),
        ("recent_messages", recent_text),
        ("dynamic_tail", tail),
    ]
    images = {"recent_messages": in_history, "dynamic_tail": shown_images(looked_at)}
    layers = _layers(texts, cached, images)
    names = [t.name for t in specs if not t.deferred]
    names += [t.name for d in visible for t in specs if tools[t.name].domain == d]
    return BuiltContext(request, layers, reported_now, prefix, names, len(data.steps))


def _layers(
    texts: list[tuple[str, str]], cached: dict[str, bool], images: dict[str, list[Any]]
) -> list[dict[str, Any]]:
    """Each layer's text, its size, whether the cache holds it, and the pictures in it."""
    return [
        {
            "name": n,
            "text": t,
            "tokens": estimate_tokens(t) if t else 0,
            "cached": cached[n],
            "images": images.get(n, []),
        }
        for n, t in texts
    ]


def _window_calls(h: _History) -> list[CallRow]:
    """The calls of the segment that closed last and of the steps still verbatim when it
    closed (fixed until the next close): what decides which loads cross the boundary."""
    size = h.policy.segment_steps
    window = h.kept(h.data.steps[h.boundary - size : h.boundary + h.policy.recent_steps])
    return [c for st in window for c in h.by_step.get((st.turn, st.step), [])]


def _carried_domains(h: _History, tools: Tools) -> list[str]:
    """Domains carried over the compression boundary: those used in the window
    (`_window_calls`); a domain not used there is unloaded, its tool definitions leave the
    context with its load."""
    if not h.closed:
        return []
    rank = {d: i for i, d in enumerate(DOMAINS)}
    used = loaded_domains(_window_calls(h), tools)
    return sorted(used, key=lambda d: (rank.get(d, len(rank)), d))


def _carried_guides(h: _History, domains: list[str]) -> list[str]:
    """Guides carried over the boundary: decided at the step that closed it (from the guides
    it could see then) and kept as they are until the next close, so no byte moves."""
    if not h.closed:
        return []
    prev = h.data.prev_prefix or {}
    if prev.get("closed") == h.closed and "carried_guides" in prev:
        return [n for n in prev["carried_guides"] if n in GUIDES]
    read = [n for c in _window_calls(h) for n in _guides_loaded(c)]
    return carried_guides(GUIDES, read, prev.get("guides", []), domains)


def _guides_loaded(call: CallRow | None) -> list[str]:
    if call is None or call.name != "load_guide" or call.status != "done" or not call.result:
        return []
    return [str(n) for n in call.result.get("loaded", []) if str(n) in GUIDES]


def _summaries(conv: _Conversation, h: _History) -> tuple[list[str], str]:
    """The request that started the task, verbatim (the task always in view), then one
    summary per closed segment, appended in order, with the profile additions of its steps
    after it: a close only appends to this message."""
    if not h.closed:
        return [], sha([])
    size = h.policy.segment_steps
    first = h.data.steps[0]
    blocks: list[Block] = [
        TextBlock(text=m.text) for m in h.msgs_at.get((first.turn, first.step), [])
    ]
    texts: list[str] = []
    for k in range(h.closed):
        seg = h.segment(k)
        summary = h.data.summaries.get(k)
        if summary is None or h.kept(seg) != seg:
            # Not written yet, or forgetting touched it: one line per kept step.
            summary = "\n".join(step_line(s, h.data.messages, h.calls) for s in h.kept(seg))
        texts.append(
            f"[runtime] summary of steps {k * size + 1}–{(k + 1) * size}: {summary or '-'}"
        )
        blocks.append(TextBlock(text=texts[-1]))
        blocks.extend(
            TextBlock(text=t) for at, t in h.profile.notes if k * size <= at < (k + 1) * size
        )
    conv.add("user", blocks)
    conv.cache_points.append(conv.point())
    return texts, sha([_fields(b) for b in conv.messages[0].content])


@dataclass
class _Visible:
    """What the history has loaded so far: tool domains and guides, in load order."""

    domains: list[str]
    guides: list[str]


def _recent_steps(conv: _Conversation, h: _History, tools: Tools, seen: _Visible) -> None:
    """The steps of the open segments verbatim, with domain and guide loads and profile
    additions where they happened, then this step's new messages."""
    for i, s in enumerate(h.data.steps[h.boundary :], start=h.boundary):
        for at, t in h.profile.notes:
            if at == i:
                conv.add("user", [TextBlock(text=t)])
        if (s.turn, s.step) in h.data.excluded_steps:
            continue
        for m in h.msgs_at.get((s.turn, s.step), []):
            conv.add("user", with_attachments(m, h.data))
        _step(conv, h, s, tools, seen)
    for at, t in h.profile.notes:
        if at == len(h.data.steps):
            conv.add("user", [TextBlock(text=t)])
    for mid in h.data.message_ids:
        if mid in h.data.messages:
            conv.add("user", with_attachments(h.data.messages[mid], h.data))


def _step(conv: _Conversation, h: _History, s: StepRow, tools: Tools, seen: _Visible) -> None:
    """One stored step: its response, its calls' results, the loads of domains whose tools
    it called unloaded (loaded from then on), and the guides a domain load brings along."""
    resp = ModelResponse.from_dict(body(s))
    conv.add("assistant", list(resp.content))
    results: list[Block] = []
    implicit: list[str] = []
    fresh: list[str] = []
    for tu in resp.tool_uses:
        call = h.calls.get(tu.id)
        shown = visible_result(call.result) if call and call.result else {"status": "missing"}
        seen.guides.extend(n for n in _guides_loaded(call) if n not in seen.guides)
        new = [d for d in (loaded_domains([call], tools) if call else []) if d not in seen.domains]
        seen.domains.extend(new)
        fresh.extend(new)
        if tu.name == "load_tools" and new:
            refs = [n for d in new for n in domain_tool_names(tools, d)]
            results.append(ToolResultBlock(tool_use_id=tu.id, content="", tool_refs=refs))
            continue
        implicit.extend(new)
        results.append(ToolResultBlock(tool_use_id=tu.id, content=json.dumps(shown)))
    if results:
        conv.add("user", results)
    if implicit:
        ids = [f"toolu_load_{s.turn}_{s.step}_{d}" for d in implicit]
        conv.load(ids, implicit, tools)
    brought = [n for n in with_domains(GUIDES, fresh) if n not in seen.guides]
    if brought and "load_guide" in tools:
        conv.add("user", [TextBlock(text=guide_block(GUIDES[n])) for n in brought])
        seen.guides.extend(brought)


def _tail(conv: _Conversation, data: StepData, recalled: Recalled) -> tuple[str, list[str]]:
    """The dynamic tail, added after the history when there is one."""
    steps = data.steps
    since = steps[-1].created_at if steps else None
    # A finished job is shown until a stored step has seen it (not "since the last step":
    # a fast job can finish before the step that submitted it is even stored).
    reported = {o for st in steps for o in st.reported_orders or []}
    # The turn line is news only at a turn's first step (or when nothing else would close
    # the request with a user message).
    status = not steps or steps[-1].turn != data.task.turn
    status = status or not conv.messages or conv.messages[-1].role != "user"
    tail, shown = dynamic_tail(data, since, reported, recalled, status)
    if tail:
        conv.add("user", [TextBlock(text=tail)])
    return tail, shown


def _system(rules: str, profile: str, header: str) -> list[SystemBlock]:
    """Breakpoints (at most four in all): after the core tools and the rules (one prefix
    long enough to be cached alone), after the profile snapshot; the task's fixed lines
    follow, cached with everything after them."""
    system = [SystemBlock(text=rules, cache=True)]
    if profile:
        system.append(SystemBlock(text=profile, cache=True))
    system.append(SystemBlock(text=header))
    return system


def _fields(block: Block) -> dict[str, Any]:
    """A block's fields for its fingerprint (blocks are flat: a shallow copy hashes to the
    same JSON as `asdict`, without its deep copy)."""
    return dict(vars(block))


def _spec_dict(t: ToolSpec) -> dict[str, Any]:
    return {"name": t.name, "description": t.description, "input_schema": t.input_schema}


def _render(m: Message) -> str:
    out = []
    for b in m.content:
        if isinstance(b, TextBlock):
            out.append(f"{m.role}: {b.text}")
        elif isinstance(b, ToolResultBlock):
            out.append(f"tool_result: {b.content}")
        elif isinstance(b, ImageBlock):
            out.append(f"{m.role}: {b.label()}")
        else:
            out.append(f"tool_use: {b.name} {json.dumps(b.input)}")
    return "\n".join(out)

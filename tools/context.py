"""Domain tools on demand and large outputs outside the context (article §6.2, §6.3).

The stable prefix holds only the core tools and `load_tools`; a domain's tools (image,
video, audio, 3d, documents, flows, memory, budget) are sent with `defer_loading`, which
keeps them out of the prompt, and a load puts `tool_reference`s to them into the
conversation (the `load_tools` result), where the API expands them: loading appends, it
never changes a byte before the history's breakpoint. A domain stays loaded while its load
is in the verbatim history; at a compression boundary (a segment closing) only the domains
used in the closed segment or the steps after it are carried over, the others are unloaded
and the tool block shrinks again. Visibility is not authorization: every tool checks its
own preconditions on the server. A call to a tool whose domain is not loaded runs through
those same checks, loads the domain for the next steps and says so in its result.

A tool result longer than `tool_output_inline_chars` is kept in `tool_outputs`; the context
carries a short preview and the handle, and `read_output(handle, offset, limit)` pages.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from journal.rows import CallLike, call_order
from llm.types import ToolSpec
from lomo.db.context import ToolOutput
from lomo.db.models import ModelStep, ToolCall
from lomo.ids import new_id
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult, error

# The order domains are offered in (the system text lists them in this order).
DOMAINS = ("image", "video", "audio", "3d", "documents", "flows", "memory", "budget")
PREVIEW_CHARS = 400


def loaded_domains(calls: Iterable[CallLike], tools: dict[str, Tool]) -> list[str]:
    """The task's loaded domains in the order they were loaded (appending a later domain
    never moves an earlier one): by a `load_tools` call, or by calling one of its tools."""
    order: list[str] = []
    for c in sorted(calls, key=lambda c: call_order(c.call_id)):
        found: list[str] = []
        if c.name == "load_tools" and c.status == "done" and c.result:
            found = [str(d) for d in c.result.get("loaded", [])]
        elif c.name in tools and tools[c.name].domain != "core":
            found = [tools[c.name].domain]
        order.extend(d for d in found if d not in order)
    return order


def request_tools(tools: dict[str, Tool]) -> list[ToolSpec]:
    """What every step sends: the core tools, then every domain's tools deferred (not in the
    prompt until referenced), so the tools array never changes during a task."""
    core = [t.spec for t in tools.values() if t.domain == "core"]
    extra = [
        ToolSpec(t.spec.name, t.spec.description, t.spec.input_schema, deferred=True)
        for d in domain_index(tools)
        for t in tools.values()
        if t.domain == d
    ]
    return [*core, *extra]


def domain_tool_names(tools: dict[str, Tool], domain: str) -> list[str]:
    return [t.spec.name for t in tools.values() if t.domain == domain]


def domain_index(tools: dict[str, Tool]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for t in tools.values():
        if t.domain != "core":
            out.setdefault(t.domain, []).append(t.name)
    return {d: out[d] for d in (*DOMAINS, *sorted(set(out) - set(DOMAINS))) if d in out}


def tools_text(tools: dict[str, Tool]) -> str:
    """The stable prefix's description of the tool set (no loaded state in it)."""
    core = ", ".join(t.name for t in tools.values() if t.domain == "core")
    domains = "; ".join(f"{d}: {', '.join(n)}" for d, n in domain_index(tools).items())
    return (
        f"Core tools: {core}.\nMore tools by domain, available after load_tools(domain) "
        f"(they appear from the next step on): {domains}."
    )


class LoadTools(Tool):
    """Make a domain's tools visible from the next step on (appended after the breakpoint)."""

    idempotent = True
    inline_output = True

    def __init__(self, tools: dict[str, Tool]) -> None:
        self.tools = tools  # the registry's dict: filled before any call runs
        self.spec = ToolSpec(
            name="load_tools",
            description="Load the tools of one domain (" + ", ".join(DOMAINS) + "); they are "
            "available from your next step on. Loading shows tools; it approves nothing.",
            input_schema={
                "type": "object",
                "properties": {"domain": {"type": "string", "enum": list(DOMAINS)}},
                "required": ["domain"],
            },
        )

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        index = domain_index(self.tools)
        domain = str(args.get("domain", ""))
        if domain not in index:
            return error(f"unknown domain {domain!r}", domains=list(index))
        return ToolResult("done", {"loaded": [domain], "tools": index[domain]})


class ReadOutput(Tool):
    """Page through a tool output that was kept outside the context."""

    idempotent = True
    inline_output = True  # its pages are bounded; never stored outside themselves

    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps
        page = deps.settings.tool_output_page_chars
        self.spec = ToolSpec(
            name="read_output",
            description="Read part of a large tool output by its handle (out_…): `offset` "
            f"characters in, at most `limit` characters (≤ {page}).",
            input_schema={
                "type": "object",
                "properties": {
                    "handle": {"type": "string"},
                    "offset": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": page},
                },
                "required": ["handle"],
            },
        )

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        page = self.deps.settings.tool_output_page_chars
        try:
            offset = int(args.get("offset", 0))
            limit = min(int(args.get("limit", page)), page)
        except (TypeError, ValueError):
            return error("offset and limit must be integers")
        if offset < 0 or limit < 1:
            return error("offset must be ≥ 0 and limit ≥ 1")
        async with self.deps.db.session() as s:
            out = await s.get(ToolOutput, str(args.get("handle", "")))
            if out is None or out.user_id != ctx.user_id:
                return error(f"no output {args.get('handle')!r}")
            text = out.content[offset : offset + limit]
            size = out.size
        end = offset + len(text)
        return ToolResult(
            "done",
            {
                "handle": args["handle"],
                "offset": offset,
                "size": size,
                "text": text,
                "next_offset": end if end < size else None,
            },
        )


def context_tools(deps: ToolDeps, tools: dict[str, Tool]) -> list[Tool]:
    return [LoadTools(tools), ReadOutput(deps)]


async def keep_outside(
    s: AsyncSession, user_id: str, task_id: str, call_id: str, record: dict[str, Any], limit: int
) -> dict[str, Any]:
    """The record the journal keeps and the context shows: unchanged when small; else the
    visible part goes to `tool_outputs` (once per call_id) and a preview plus handle stays."""
    visible = {k: v for k, v in record.items() if not k.startswith("_")}
    text = json.dumps(visible, ensure_ascii=False)
    if len(text) <= limit:
        return record
    out = await s.scalar(select(ToolOutput).where(ToolOutput.call_id == call_id))
    if out is None:
        out = ToolOutput(
            id=new_id("out"),
            user_id=user_id,
            task_id=task_id,
            call_id=call_id,
            content=text,
            size=len(text),
        )
        s.add(out)
        await s.flush()
    keys = ("status", "order_id", "card_id", "error")
    small: dict[str, Any] = {k: record[k] for k in keys if k in record}
    if isinstance(record.get("artifacts"), list) and len(json.dumps(record["artifacts"])) < 500:
        small["artifacts"] = record["artifacts"]
    return {
        **small,
        "output_handle": out.id,
        "size": out.size,
        "preview": text[:PREVIEW_CHARS],
        "note": f"the full output ({out.size} characters) is kept outside the context; "
        "read it with read_output(handle, offset, limit)",
        **{k: v for k, v in record.items() if k.startswith("_")},
    }


async def note_unloaded(
    s: AsyncSession, task_id: str, call_id: str, tool: Tool, tools: dict[str, Tool]
) -> str | None:
    """Why a call to a tool the model could not see still ran (or None if it was visible)."""
    if tool.domain == "core":
        return None
    turn, step, _ = call_order(call_id)
    # Only the step's prefix notes, not its whole stored context (the text it was sent).
    row = (
        await s.execute(
            select(ModelStep.id, ModelStep.context["prefix"]).where(
                ModelStep.task_id == task_id, ModelStep.turn == turn, ModelStep.step == step
            )
        )
    ).first()
    seen = (row[1] or {}).get("domains") if row is not None else None
    if seen is None:  # no record of what the step saw: every earlier load counts
        calls = [
            c
            for c in await s.scalars(select(ToolCall).where(ToolCall.task_id == task_id))
            if call_order(c.call_id)[:2] < (turn, step)
        ]
        seen = loaded_domains(calls, tools)
    if tool.domain in seen:
        return None
    return (
        f"{tool.name} belongs to the domain {tool.domain!r}, which was not loaded: it ran "
        "through its usual checks (visibility is not authorization) and the domain is "
        "loaded from the next step on"
    )

"""Domain tools on demand and large outputs outside the context (docs/architecture.md#context).

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

Creative guides (`context/guides/`) load the same way: `load_guide(name)` appends one to the
history, a domain load brings its medium's guide along, and a segment close keeps only the
guides the work still uses.

A tool result longer than `tool_output_inline_chars` is kept in `tool_outputs`; the context
carries a short preview and the handle, and `read_output(handle, offset, limit)` pages.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from context.guides import GUIDES
from context.tools import DOMAINS, domain_index
from llm.types import ToolSpec
from lomo.db.context import ToolOutput
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult, error
from tools.history import SearchHistory

PREVIEW_CHARS = 400


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


class LoadGuide(Tool):
    """Put a creative guide into the history (appended, like a domain load): how to brief
    and prompt a medium and the limits of its models. The context keeps it while the work
    uses it and drops it at a segment close otherwise."""

    idempotent = True
    inline_output = True  # a guide is a few hundred tokens

    def __init__(self) -> None:
        self.spec = ToolSpec(
            name="load_guide",
            description="Load a creative guide (" + ", ".join(GUIDES) + ") into your "
            "context: how to brief and prompt that medium, and the limits of its models.",
            input_schema={
                "type": "object",
                "properties": {"name": {"type": "string", "enum": list(GUIDES)}},
                "required": ["name"],
            },
        )

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        guide = GUIDES.get(str(args.get("name", "")))
        if guide is None:
            return error(f"unknown guide {args.get('name')!r}", guides=list(GUIDES))
        return ToolResult("done", {"loaded": [guide.name], "guide": guide.text})


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
    return [LoadTools(tools), LoadGuide(), SearchHistory(deps), ReadOutput(deps)]


@dataclass(frozen=True, slots=True)
class Kept:
    """A call's record as the journal keeps it; with `text` (its visible part) and `handle`
    when that part is kept outside the context."""

    record: dict[str, Any]
    text: str = ""
    handle: str = ""


def keep_outside(call_id: str, record: dict[str, Any], limit: int) -> Kept:
    """The record unchanged when small; else a preview plus the handle under which the
    visible part is kept (`tool_outputs`, one row per call: the handle follows from the
    call's id, so a retry stores nothing twice)."""
    visible = {k: v for k, v in record.items() if not k.startswith("_")}
    text = json.dumps(visible, ensure_ascii=False)
    if len(text) <= limit:
        return Kept(record)
    handle = "out_" + hashlib.sha256(call_id.encode()).hexdigest()[:24]
    keys = ("status", "order_id", "card_id", "error")
    small: dict[str, Any] = {k: record[k] for k in keys if k in record}
    if isinstance(record.get("artifacts"), list) and len(json.dumps(record["artifacts"])) < 500:
        small["artifacts"] = record["artifacts"]
    return Kept(
        {
            **small,
            "output_handle": handle,
            "size": len(text),
            "preview": text[:PREVIEW_CHARS],
            "note": f"the full output ({len(text)} characters) is kept outside the context; "
            "read it with read_output(handle, offset, limit)",
            **{k: v for k, v in record.items() if k.startswith("_")},
        },
        text,
        handle,
    )


def unloaded_note(tool: Tool, seen: list[str] | None) -> str | None:
    """Why a call to a tool the model could not see still ran (None if it was visible);
    `seen`: the domains the step that planned it could see."""
    if tool.domain == "core" or tool.domain in (seen or []):
        return None
    return (
        f"{tool.name} belongs to the domain {tool.domain!r}, which was not loaded: it ran "
        "through its usual checks (visibility is not authorization) and the domain is "
        "loaded from the next step on"
    )

"""The agent's memory tools: recall what the person said before, ask to forget a memory."""

from __future__ import annotations

from typing import Any

from llm.types import ToolSpec
from lomo.errors import InvalidInput, NotFound
from memory.cards import request_forget_card
from memory.context import memory_for_context
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult, error


class ForgetMemory(Tool):
    """The person asked in chat to forget something: put the confirmation card in front of
    them. Nothing is forgotten unless they confirm (forgetting is irreversible)."""

    domain = "memory"
    spec = ToolSpec(
        name="forget_memory",
        description=(
            "Ask the person to confirm forgetting a memory (by memory_id) or everything "
            "that contains some words (text). Nothing is forgotten unless they confirm."
        ),
        input_schema={
            "type": "object",
            "properties": {"memory_id": {"type": "string"}, "text": {"type": "string"}},
        },
    )

    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        memory_id = args.get("memory_id") or None
        text = args.get("text") or None
        try:
            async with self.deps.db.session() as s:
                card = await request_forget_card(
                    s,
                    ctx.user_id,
                    str(memory_id) if memory_id else None,
                    str(text)[:2000] if text else None,
                    ctx.task_id,
                    ctx.call_id,
                )
        except (NotFound, InvalidInput) as e:
            return error(e.detail)
        return ToolResult(
            "needs_confirmation",
            {"status": "waiting_for_person", "card_id": card.id},
            card_id=card.id,
        )


class RecallMemory(Tool):
    """Search the person's memories beyond what the context already holds (bounded)."""

    domain = "memory"
    spec = ToolSpec(
        name="recall_memory",
        description=(
            "Search the person's long-term memory (facts they stated, inferences marked as "
            "such) for a topic; returns memories with their ids and sources."
        ),
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    )

    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        query = str(args.get("query") or "").strip()
        if not query:
            return error("query must not be empty")
        found = await memory_for_context(self.deps, ctx.user_id, ctx.task_id, query[:500])
        out: dict[str, Any] = {"profile_version": found.profile_version, "memories": found.items}
        if found.degraded:
            out["degraded"] = found.degraded
        return ToolResult("done", out)


def memory_tools(deps: ToolDeps) -> list[Tool]:
    return [ForgetMemory(deps), RecallMemory(deps)]

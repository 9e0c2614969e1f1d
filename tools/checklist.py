"""The model's checklist tools (the checklist room holds the rules): `update_checklist`,
which the room validates as a whole, and `ask_person`, the model's way to put a card in
front of the person.
"""

from __future__ import annotations

from typing import Any

from checklist.change import Step, change_checklist
from checklist.decisions import ASK_KINDS, NoStep, ask
from checklist.items import ITEM_STATUSES
from llm.types import ToolSpec
from lomo.states import CardKind
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult, error


class UpdateChecklist(Tool):
    spec = ToolSpec(
        name="update_checklist",
        description=(
            "Propose changes to the task's execution checklist. `add` appends steps; "
            "`update` changes a step's status (open, in_progress, done, blocked, skipped) "
            "with evidence: a step is done only with artifacts (object ids), a succeeded "
            "order_id, or, for a step that requires confirmation, the person's answered "
            "card_id. Done steps cannot be removed or reopened."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "add": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "title": {"type": "string"},
                            "requires_confirmation": {"type": "boolean"},
                        },
                        "required": ["title"],
                    },
                },
                "update": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "status": {"type": "string", "enum": list(ITEM_STATUSES)},
                            "artifacts": {"type": "array", "items": {"type": "string"}},
                            "order_id": {"type": "string"},
                            "card_id": {"type": "string"},
                            "note": {"type": "string"},
                        },
                        "required": ["id", "status"],
                    },
                },
            },
        },
    )
    idempotent = True  # replays with the same call_id find their items by id/position

    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        adds = args.get("add") or []
        updates = args.get("update") or []
        if not isinstance(adds, list) or not isinstance(updates, list):
            return error("`add` and `update` must be lists")
        step = Step(ctx.task_id, ctx.user_id, ctx.call_id, ctx.turn)
        async with self.deps.db.session() as s:
            out = await change_checklist(s, step, adds, updates)
        if out.problems:
            # All or nothing: the model hears every reason and nothing changes.
            return error("checklist change refused", reasons=out.problems)
        return ToolResult(
            "done",
            {"checklist": out.checklist, "done": out.done},
            made_progress=bool(out.done),  # rewording or flipping statuses is not progress
            artifacts=out.artifacts,
        )


class AskPerson(Tool):
    spec = ToolSpec(
        name="ask_person",
        description=(
            "Put a card in front of the person and wait for the answer: `confirm` (yes/no), "
            "`select` (pick one of `options`), `clarify` (a question). Link it to the "
            "checklist step it decides with `item_id`."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": ["confirm", "select", "clarify"]},
                "title": {"type": "string"},
                "options": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"id": {"type": "string"}, "label": {"type": "string"}},
                        "required": ["id", "label"],
                    },
                },
                "item_id": {"type": "string"},
            },
            "required": ["kind", "title"],
        },
    )
    idempotent = True  # the card is keyed by the call_id

    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        kind = str(args.get("kind") or "")
        options = args.get("options") or []
        if kind not in ASK_KINDS:
            return error("kind must be confirm, select or clarify")
        if kind == CardKind.SELECT and (
            not isinstance(options, list)
            or len(options) < 2
            or not all(isinstance(o, dict) and o.get("id") and o.get("label") for o in options)
        ):
            return error("a select card needs at least two options with id and label")
        item_id = args.get("item_id")
        try:
            async with self.deps.db.session() as s:
                card = await ask(
                    s,
                    user_id=ctx.user_id,
                    task_id=ctx.task_id,
                    kind=kind,
                    title=str(args.get("title") or ""),
                    options=[{"id": str(o["id"]), "label": str(o["label"])} for o in options],
                    item_id=str(item_id) if item_id else None,
                    key=ctx.call_id,
                )
        except NoStep:
            return error(f"no checklist step {item_id}")
        return ToolResult("done", {"status": "asked", "card_id": card.id}, card_id=card.id)


def checklist_tools(deps: ToolDeps) -> list[Tool]:
    return [UpdateChecklist(deps), AskPerson(deps)]

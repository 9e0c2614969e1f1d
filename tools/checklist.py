"""The execution checklist (docs/architecture.md#turns-the-checklist-and-the-stop-check):
persisted, owned by the runtime, changed by the model only through `update_checklist`,
which the runtime validates: no silent deletion of done steps, no step marked done without
evidence, a confirmation step done only by the person's answer. Also `ask_person`, the
model's way to put a card in front of the person.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from llm.types import ToolSpec
from lomo import clock
from lomo.cards import CardEffect, confirmed, create_card
from lomo.db.models import Card, ChecklistItem, GenerationOrder, WorkObject
from lomo.events import append_event
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult, error

ITEM_STATUSES = ("open", "in_progress", "done", "blocked", "skipped")
MAX_ITEMS = 50


def item_view(i: ChecklistItem) -> dict[str, Any]:
    return {
        "id": i.id,
        "title": i.title,
        "status": i.status,
        "requires_confirmation": i.requires_confirmation,
        "artifacts": i.artifacts,
        "note": i.note,
    }


async def load_items(s: AsyncSession, task_id: str) -> list[ChecklistItem]:
    rows = await s.scalars(
        select(ChecklistItem)
        .where(ChecklistItem.task_id == task_id)
        .order_by(ChecklistItem.position)
    )
    return list(rows)


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
        async with self.deps.db.session() as s:
            items = await load_items(s, ctx.task_id)
            by_id = {i.id: i for i in items}
            problems = [p for u in updates for p in await _check_update(s, ctx, by_id, u)]
            for a in adds:
                if not isinstance(a, dict) or not str(a.get("title") or "").strip():
                    problems.append("every added step needs a title")
            if len(items) + len(adds) > MAX_ITEMS:
                problems.append(f"a checklist holds at most {MAX_ITEMS} steps")
            if problems:
                # All or nothing: the model hears every reason and nothing changes.
                return error("checklist change refused", reasons=problems)
            done_now: list[str] = []
            artifacts: list[str] = []
            stamp = clock.now()
            for u in updates:
                item = by_id[str(u["id"])]
                new = str(u["status"])
                if new == "done" and item.status != "done":
                    done_now.append(item.id)
                    item.done_turn = ctx.turn
                    item.evidence = _evidence(u)
                item.status = new
                if u.get("artifacts"):
                    item.artifacts = sorted({*item.artifacts, *map(str, u["artifacts"])})
                    artifacts.extend(item.artifacts)
                if u.get("note"):
                    item.note = str(u["note"])[:2000]
                item.updated_at = stamp
            base = max((i.position for i in items), default=-1) + 1
            for n, a in enumerate(adds):
                # A replay of the same call must not add twice: ids derive from the call.
                item_id = "chk_" + hashlib.sha256(f"{ctx.call_id}#{n}".encode()).hexdigest()[:24]
                if item_id in by_id:
                    continue
                item = ChecklistItem(
                    id=item_id,
                    task_id=ctx.task_id,
                    position=base + n,
                    title=str(a["title"])[:500],
                    requires_confirmation=bool(a.get("requires_confirmation")),
                    artifacts=[],
                    evidence={},
                )
                s.add(item)
                items.append(item)
            await s.flush()
            view = [item_view(i) for i in await load_items(s, ctx.task_id)]
            await append_event(
                s, ctx.user_id, "task.checklist", {"task_id": ctx.task_id, "checklist": view}
            )
        return ToolResult(
            "done",
            {"checklist": view, "done": done_now},
            made_progress=bool(done_now),  # rewording or flipping statuses is not progress
            artifacts=sorted(set(artifacts)),
        )


def _evidence(u: dict[str, Any]) -> dict[str, Any]:
    return {k: u[k] for k in ("artifacts", "order_id", "card_id") if u.get(k)}


async def _check_update(
    s: AsyncSession, ctx: ToolCallContext, by_id: dict[str, ChecklistItem], u: Any
) -> list[str]:
    if not isinstance(u, dict) or "id" not in u or "status" not in u:
        return ["every update needs an id and a status"]
    item = by_id.get(str(u["id"]))
    new = str(u["status"])
    if item is None:
        return [f"no step {u['id']} in this checklist"]
    if new not in ITEM_STATUSES:
        return [f"{new!r} is not a step status; one of {', '.join(ITEM_STATUSES)}"]
    if item.status == "done" and new != "done":
        return [f"step {item.id} is done; done steps are never removed or reopened"]
    if new != "done" or item.status == "done":
        return []
    if item.requires_confirmation:
        card_id = u.get("card_id")
        card = await s.get(Card, str(card_id)) if card_id else None
        if card is None or card.task_id != ctx.task_id or not _person_agreed(card):
            return [f"step {item.id} needs the person's confirmation (an answered card_id)"]
        return []
    return await _has_evidence(s, ctx, item, u)


def _person_agreed(card: Card) -> bool:
    answer = card.answer or {}
    return confirmed(card) or (card.status == "answered" and answer.get("action") == "select")


async def _has_evidence(
    s: AsyncSession, ctx: ToolCallContext, item: ChecklistItem, u: dict[str, Any]
) -> list[str]:
    for object_id in u.get("artifacts") or []:
        obj = await s.get(WorkObject, str(object_id))
        if obj is None or obj.user_id != ctx.user_id or obj.deleted:
            return [f"artifact {object_id} does not exist"]
    if u.get("artifacts"):
        return []
    if order_id := u.get("order_id"):
        order = await s.get(GenerationOrder, str(order_id))
        if order and order.task_id == ctx.task_id and order.status == "succeeded":
            return []
        return [f"order {order_id} has not succeeded for this task"]
    if card_id := u.get("card_id"):
        card = await s.get(Card, str(card_id))
        if card and card.task_id == ctx.task_id and _person_agreed(card):
            return []
        return [f"card {card_id} was not answered by the person"]
    return [f"step {item.id} cannot be done without evidence (artifacts, order_id or card_id)"]


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
        if kind not in ("confirm", "select", "clarify"):
            return error("kind must be confirm, select or clarify")
        if kind == "select" and (
            not isinstance(options, list)
            or len(options) < 2
            or not all(isinstance(o, dict) and o.get("id") and o.get("label") for o in options)
        ):
            return error("a select card needs at least two options with id and label")
        if kind == "confirm" and not options:
            options = [{"id": "confirm", "label": "Yes"}, {"id": "reject", "label": "No"}]
        async with self.deps.db.session() as s:
            item_id = args.get("item_id")
            if item_id and (await s.get(ChecklistItem, str(item_id))) is None:
                return error(f"no checklist step {item_id}")
            card = await create_card(
                s,
                user_id=ctx.user_id,
                kind=kind,
                title=str(args.get("title") or "")[:500],
                options=[{"id": str(o["id"]), "label": str(o["label"])} for o in options],
                task_id=ctx.task_id,
                payload={"item_id": item_id} if item_id else {},
                key=ctx.call_id,
            )
        return ToolResult("done", {"status": "asked", "card_id": card.id}, card_id=card.id)


def checklist_tools(deps: ToolDeps) -> list[Tool]:
    return [UpdateChecklist(deps), AskPerson(deps)]


async def _close_decided_step(s: AsyncSession, card: Card) -> None:
    """The person's yes (or choice) on a card tied to a checklist step is that step's
    evidence: the step is done at once, by the person's authenticated action."""
    item_id = (card.payload or {}).get("item_id")
    if not item_id or not _person_agreed(card):
        return
    item = await s.get(ChecklistItem, str(item_id), with_for_update=True)
    if item is None or item.task_id != card.task_id or item.status == "done":
        return
    item.status = "done"
    item.evidence = {"card_id": card.id, "option_id": (card.answer or {}).get("option_id")}
    item.confirmed_by_card = card.id
    item.updated_at = clock.now()


DECISION_EFFECT = CardEffect(in_transaction=_close_decided_step)

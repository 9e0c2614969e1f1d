"""A change the model proposes to a task's checklist, checked as a whole: every reason
to refuse is collected and nothing changes, or all of it is applied."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from cards.store import agreed
from checklist.items import ITEM_STATUSES, MAX_ITEMS, item_view, load_items
from lomo import clock
from lomo.db.models import Card, ChecklistItem, GenerationOrder, WorkObject
from lomo.events import append_event
from lomo.states import OrderStatus


@dataclass
class Step:
    """Who proposes the change: the task's model call (`call_id` keys what it adds)."""

    task_id: str
    user_id: str
    call_id: str
    turn: int


@dataclass
class Outcome:
    problems: list[str] = field(default_factory=list)  # refused when not empty
    checklist: list[dict[str, Any]] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)


async def change_checklist(
    s: AsyncSession, step: Step, adds: list[Any], updates: list[Any]
) -> Outcome:
    items = await load_items(s, step.task_id)
    by_id = {i.id: i for i in items}
    problems = [p for u in updates for p in await _check_update(s, step, by_id, u)]
    for a in adds:
        if not isinstance(a, dict) or not str(a.get("title") or "").strip():
            problems.append("every added step needs a title")
    if len(items) + len(adds) > MAX_ITEMS:
        problems.append(f"a checklist holds at most {MAX_ITEMS} steps")
    if problems:
        return Outcome(problems=problems)
    out = Outcome()
    stamp = clock.now()
    for u in updates:
        item = by_id[str(u["id"])]
        new = str(u["status"])
        if new == "done" and item.status != "done":
            out.done.append(item.id)
            item.done_turn = step.turn
            item.evidence = _evidence(u)
        item.status = new
        if u.get("artifacts"):
            item.artifacts = sorted({*item.artifacts, *map(str, u["artifacts"])})
            out.artifacts.extend(item.artifacts)
        if u.get("note"):
            item.note = str(u["note"])[:2000]
        item.updated_at = stamp
    _add(s, step, items, by_id, adds)
    await s.flush()
    out.checklist = [item_view(i) for i in await load_items(s, step.task_id)]
    await append_event(
        s, step.user_id, "task.checklist", {"task_id": step.task_id, "checklist": out.checklist}
    )
    out.artifacts = sorted(set(out.artifacts))
    return out


def _add(
    s: AsyncSession,
    step: Step,
    items: list[ChecklistItem],
    by_id: dict[str, ChecklistItem],
    adds: list[Any],
) -> None:
    base = max((i.position for i in items), default=-1) + 1
    for n, a in enumerate(adds):
        # A replay of the same call must not add twice: ids derive from the call.
        item_id = "chk_" + hashlib.sha256(f"{step.call_id}#{n}".encode()).hexdigest()[:24]
        if item_id in by_id:
            continue
        item = ChecklistItem(
            id=item_id,
            task_id=step.task_id,
            position=base + n,
            title=str(a["title"])[:500],
            requires_confirmation=bool(a.get("requires_confirmation")),
            artifacts=[],
            evidence={},
        )
        s.add(item)
        items.append(item)


def _evidence(u: dict[str, Any]) -> dict[str, Any]:
    return {k: u[k] for k in ("artifacts", "order_id", "card_id") if u.get(k)}


async def _check_update(
    s: AsyncSession, step: Step, by_id: dict[str, ChecklistItem], u: Any
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
        if card is None or card.task_id != step.task_id or not agreed(card):
            return [f"step {item.id} needs the person's confirmation (an answered card_id)"]
        return []
    return await _has_evidence(s, step, item, u)


async def _has_evidence(
    s: AsyncSession, step: Step, item: ChecklistItem, u: dict[str, Any]
) -> list[str]:
    for object_id in u.get("artifacts") or []:
        obj = await s.get(WorkObject, str(object_id))
        if obj is None or obj.user_id != step.user_id or obj.deleted:
            return [f"artifact {object_id} does not exist"]
    if u.get("artifacts"):
        return []
    if order_id := u.get("order_id"):
        order = await s.get(GenerationOrder, str(order_id))
        if order and order.task_id == step.task_id and order.status == OrderStatus.SUCCEEDED:
            return []
        return [f"order {order_id} has not succeeded for this task"]
    if card_id := u.get("card_id"):
        card = await s.get(Card, str(card_id))
        if card and card.task_id == step.task_id and agreed(card):
            return []
        return [f"card {card_id} was not answered by the person"]
    return [f"step {item.id} cannot be done without evidence (artifacts, order_id or card_id)"]

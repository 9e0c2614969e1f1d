"""The end of a step's request: the task's fixed lines (cached, after the profile) and the
dynamic tail after the last breakpoint (what changed since the last stored step: the turn
at a turn's start, finished jobs, answered cards, the checklist, notices, memories)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from context.types import CardRow, ItemRow, Recalled, StepData, TaskHead
from flows.graph import run_of_call
from lomo import clock
from lomo.states import CardStatus, OrderStatus
from routing.text import detect_language, language_name


def task_header(task: TaskHead) -> str:
    """The task's lines that change only when forgetting scrubs them (in the system prompt,
    after the profile)."""
    name = language_name(task.language)
    lines = [
        f"[runtime] task {task.id} ({task.kind}), language {task.language}: the person "
        f"writes in {name}; reply in {name}",
        f"[runtime] goal: {task.goal[:500]}",
    ]
    if task.briefing:
        lines.append(f"[runtime] briefing: {task.briefing[:2000]}")
    return "\n".join(lines)


def dynamic_tail(
    data: StepData,
    since: datetime | None,
    reported: set[str],
    recalled: Recalled,
    status: bool = True,
) -> tuple[str, list[str]]:
    """What changed since the last stored step, and the finished jobs shown now. The turn
    line only when `status` (the task's fixed lines are in `task_header`)."""
    lines = [f"[runtime] turn {data.task.turn}"] if status else []
    lines += _language_lines(data)
    lines += _checklist_lines(data.items)
    lines += _card_lines(data.cards, since)
    order_lines, shown = _order_lines(data, reported)
    lines += order_lines
    for a in data.assets:
        lines.append(f"[runtime] recent asset {a.id}: {a.name} ({a.created_at:%Y-%m-%d})")
    lines.extend(f"[runtime] {line}" for line in data.flow_lines)
    lines.extend(f"[runtime] change notice: {n}" for n in data.notices)
    lines.extend(f"[runtime] memory: {m}" for m in recalled.items)
    lines.extend(f"[runtime] degraded: {d}" for d in recalled.degraded)
    return "\n".join(lines), shown


def _language_lines(data: StepData) -> list[str]:
    """The person switched language since the task began: the reply follows them."""
    said = " ".join(data.said).strip()
    # A word or two ("ok", "danke") says too little to switch on.
    lang = detect_language(said) if len(said.split()) >= 3 else data.task.language
    if lang == data.task.language:
        return []
    name = language_name(lang)
    return [f"[runtime] the person now writes in {name} ({lang}); reply in {name}"]


def _checklist_lines(items: list[ItemRow]) -> list[str]:
    if not items:
        return []
    lines = ["[runtime] checklist:"]
    for i in items:
        flag = " (needs the person's confirmation)" if i.requires_confirmation else ""
        arts = f" artifacts {', '.join(i.artifacts)}" if i.artifacts else ""
        lines.append(f"  - [{i.status}] {i.id}: {i.title}{flag}{arts}")
    return lines


def _card_lines(cards: list[CardRow], since: datetime | None) -> list[str]:
    lines = []
    for c in cards:
        if c.status == CardStatus.OPEN:
            lines.append(f"[runtime] waiting for the person on card {c.id} ({c.kind}): {c.title}")
        elif c.status == CardStatus.ANSWERED and _after(c.answered_at, since):
            a = c.answer or {}
            choice = f" option {a.get('option_id')}" if a.get("option_id") else ""
            text = f": {a.get('text')}" if a.get("text") else ""
            lines.append(
                f"[runtime] the person answered card {c.id} ({c.title}): "
                f"{a.get('action')}{choice}{text}"
            )
    return lines


def _order_lines(data: StepData, reported: set[str]) -> tuple[list[str], list[str]]:
    """With a checklist, a finished result stays in view until a step carries it; without
    one, until a stored step has seen it."""
    lines: list[str] = []
    shown: list[str] = []
    attached = {a for i in data.items for a in i.artifacts}
    for o in data.orders:
        if run_of_call(o.idempotency_key):
            continue  # a flow node's order: its run's progress line speaks for it
        unseen = o.id not in reported or (bool(data.items) and o.object_id not in attached)
        if o.status == OrderStatus.SUCCEEDED and o.object_id and unseen:
            lines.append(f"[runtime] generation succeeded: order {o.id} → asset {o.object_id}")
            shown.append(o.id)
        elif o.status == OrderStatus.FAILED and o.id not in reported:
            lines.append(f"[runtime] generation failed: order {o.id}: {o.error}")
            shown.append(o.id)
        elif o.status == OrderStatus.CANCELLED:
            # Stopped upstream on purpose: nothing to wait for, nothing to make again.
            if o.id not in reported:
                lines.append(f"[runtime] generation cancelled: order {o.id}")
                shown.append(o.id)
        elif o.status != OrderStatus.FAILED and not o.object_id:
            # Succeeded but its asset not stored yet: still a job the task waits on (the
            # workflow collects it), never invisible, or the model would order it again.
            lines.append(f"[runtime] waiting on order {o.id} ({o.status})")
    return lines, shown


def _after(t: datetime | None, since: datetime | None) -> bool:
    if t is None:
        return False
    return since is None or clock.utc(t) > clock.utc(since)


def visible_result(result: dict[str, Any]) -> dict[str, Any]:
    """The journal's bookkeeping keys (leading underscore) are not for the model."""
    return {k: v for k, v in result.items() if not k.startswith("_")}

"""The end of a step's request: the task's fixed lines (cached, after the profile) and the
dynamic tail after the last breakpoint (what changed since the last stored step: the turn
at a turn's start, finished jobs, answered cards, the checklist). Split from
`activities/context.py`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from flows.graph import run_of_call
from flows.models import FlowRun
from flows.runs import progress_lines
from journal.rows import (
    TaskLike,
    load_card_rows,
    load_item_rows,
    load_order_rows,
    order_read,
    state_reads,
)
from lomo.db.hot import Bound, HotQuery
from lomo.db.models import WorkObject

if TYPE_CHECKING:
    from context.build import ContextExtras


def task_header(task: TaskLike) -> str:
    """The task's lines that change only when forgetting scrubs them (in the system prompt,
    after the profile)."""
    lines = [
        f"[runtime] task {task.id} ({task.kind}), language {task.language}",
        f"[runtime] goal: {task.goal[:500]}",
    ]
    if task.briefing:
        lines.append(f"[runtime] briefing: {task.briefing[:2000]}")
    return "\n".join(lines)


def tail_reads(task_id: str, user_id: str) -> list[Bound]:
    """The reads of `dynamic_tail`, to prefetch with a step's other reads."""
    return [
        *state_reads(task_id),
        order_read(task_id),
        _RECENT_ASSETS.bind(user_id=user_id),
        _HAS_RUNS.bind(task_id=task_id),
    ]


async def dynamic_tail(
    session: AsyncSession,
    task: TaskLike,
    since: datetime | None,
    reported: set[str],
    extras: ContextExtras,
    status: bool = True,
) -> tuple[str, list[str]]:
    # The task's fixed lines are in task_header; the turn only when `status`.
    lines = [f"[runtime] turn {task.turn}"] if status else []
    items = await load_item_rows(session, task.id)
    if items:
        lines.append("[runtime] checklist:")
        for i in items:
            flag = " (needs the person's confirmation)" if i.requires_confirmation else ""
            arts = f" artifacts {', '.join(i.artifacts)}" if i.artifacts else ""
            lines.append(f"  - [{i.status}] {i.id}: {i.title}{flag}{arts}")
    cards = await load_card_rows(session, task.id)
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
    orders = await load_order_rows(session, task.id)
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
    for oid, name, created_at in await _RECENT_ASSETS.rows(session, user_id=task.user_id):
        lines.append(f"[runtime] recent asset {oid}: {name} ({created_at:%Y-%m-%d})")
    if await _HAS_RUNS.first(session, task_id=task.id):  # most tasks never run a flow
        lines.extend(f"[runtime] {line}" for line in await progress_lines(session, task.id))
    lines.extend(f"[runtime] change notice: {n}" for n in extras.notices)
    lines.extend(f"[runtime] memory: {m}" for m in extras.memories)
    lines.extend(f"[runtime] degraded: {d}" for d in extras.degraded)
    return "\n".join(lines), shown


_RECENT_ASSETS = HotQuery(
    select(WorkObject.id, WorkObject.name, WorkObject.created_at)
    .where(WorkObject.user_id == bindparam("user_id"), WorkObject.type == "asset")
    .where(WorkObject.deleted.is_(False))
    .order_by(WorkObject.created_at.desc())
    .limit(5)
)

_HAS_RUNS = HotQuery(select(FlowRun.id).where(FlowRun.task_id == bindparam("task_id")).limit(1))


def _after(t: datetime | None, since: datetime | None) -> bool:
    if t is None:
        return False
    return since is None or _aware(t) > _aware(since)


def _aware(dt: datetime) -> datetime:
    # SQLite returns naive datetimes even for timezone=True columns.
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def visible_result(result: dict[str, Any]) -> dict[str, Any]:
    """The journal's bookkeeping keys (leading underscore) are not for the model."""
    return {k: v for k, v in result.items() if not k.startswith("_")}

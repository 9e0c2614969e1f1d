"""Change notices: what a task's next context says about objects that moved on since the
task last saw them (article §9.2).

A notice is derived from durable state, not queued: the task's `seen_version` of each
object it references against the object's current version. It therefore survives crashes
and restarts and disappears exactly when the task reads the new version. Writing a notice
wakes nothing: a person's edit only changes rows; the task sees it at its next step.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.hot import Bound, HotQuery
from lomo.db.models import ObjectVersion, TaskObject, WorkObject
from workspace.diff import summarize_change
from workspace.store import describe_author

MAX_NOTICES = 10


def notice_read(task_id: str) -> Bound:
    """The read `notices_for_context` starts with, to prefetch with a step's other reads."""
    return _LINKED.bind(task_id=task_id)


async def notices_for_context(session: AsyncSession, task_id: str) -> list[str]:
    """One line per referenced object that changed (by someone else) or was deleted since
    the task last saw it, e.g. "storyboard (obj_…) v3 → v4 (by the person): Shot 2 changed
    (+1/-1 lines); re-read it before editing"."""
    lines: list[str] = []
    for row in await _LINKED.rows(session, task_id=task_id):
        obj, deleted, deletion_seen, seen_version = _Linked(*row[:4]), *row[4:]
        if deleted:
            if not deletion_seen:
                lines.append(
                    f"{obj.name} ({obj.id}) was deleted by the person; it can no longer be "
                    "read or used, do not refer to it"
                )
            continue
        seen = seen_version or 0
        if seen == 0 or obj.version <= seen:
            continue
        line = await _change_line(session, task_id, obj, seen)
        if line:
            lines.append(line)
    if len(lines) > MAX_NOTICES:
        rest = len(lines) - MAX_NOTICES
        lines = [*lines[:MAX_NOTICES], f"and {rest} more changed object(s); list_objects shows all"]
    return lines


@dataclass(slots=True, frozen=True)
class _Linked:
    """What a notice says of an object the task references."""

    id: str
    name: str
    type: str
    version: int


# Read at every model step (lomo/db/hot.py).
_LINKED = HotQuery(
    select(
        WorkObject.id,
        WorkObject.name,
        WorkObject.type,
        WorkObject.version,
        WorkObject.deleted,
        TaskObject.deletion_seen,
        TaskObject.seen_version,
    )
    .join(WorkObject, WorkObject.id == TaskObject.object_id)
    .where(TaskObject.task_id == bindparam("task_id"))
    .order_by(WorkObject.created_at)
)


async def _change_line(session: AsyncSession, task_id: str, obj: _Linked, seen: int) -> str | None:
    newer = list(
        await session.scalars(
            select(ObjectVersion.created_by).where(
                ObjectVersion.object_id == obj.id,
                ObjectVersion.version > seen,
                ObjectVersion.version <= obj.version,
            )
        )
    )
    own = f"task:{task_id}:"
    others = sorted({describe_author(a) for a in newer if not a.startswith(own)})
    if not others:
        return None  # only this task's own writes: nothing it does not know
    old = await session.get(ObjectVersion, (obj.id, seen))
    cur = await session.get(ObjectVersion, (obj.id, obj.version))
    what = (
        summarize_change(obj.type, old.content, cur.content)
        if old is not None and cur is not None
        else "changed"
    )
    return (
        f"{obj.name} ({obj.id}) v{seen} → v{obj.version} (by {', '.join(others)}): {what}; "
        "re-read it before editing"
    )

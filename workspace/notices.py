"""Change notices: what a task's next context says about objects that moved on since the
task last saw them.

A notice is derived from durable state, not queued: the task's `seen_version` of each
object it references against the object's current version. It therefore survives crashes
and restarts and disappears exactly when the task reads the new version. Writing a notice
wakes nothing: a person's edit only changes rows; the task sees it at its next step.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import ObjectVersion, TaskObject, WorkObject
from lomo.db.query import Query, Rows, run
from workspace.diff import summarize_change
from workspace.store import describe_author

MAX_NOTICES = 10


def linked_query(task_id: str) -> Query:
    """The objects the task references with what it saw of them (rows for `notice_lines`)."""
    return Query(_LINKED, {"task_id": task_id})


def version_queries(linked: Rows) -> list[Query]:
    """The versions `notice_lines` compares, for each object that moved on since the task
    saw it: from the version seen to the current one."""
    return [
        Query(_VERSIONS, {"object_id": o.id, "seen": seen, "current": o.version})
        for o, seen in _moved(linked)
    ]


def notice_lines(linked: Rows, versions: list[Rows], task_id: str) -> list[str]:
    """One line per referenced object that changed (by someone else) or was deleted since
    the task last saw it, e.g. "storyboard (obj_…) v3 → v4 (by the person): Shot 2 changed
    (+1/-1 lines); re-read it before editing". `versions`: the rows of `version_queries`."""
    by_object = {o.id: rows for (o, _), rows in zip(_moved(linked), versions, strict=True)}
    lines: list[str] = []
    for row in linked:
        obj, deleted, deletion_seen, seen_version = _Linked(*row[:4]), *row[4:]
        if deleted:
            if not deletion_seen:
                lines.append(
                    f"{obj.name} ({obj.id}) was deleted by the person; it can no longer be "
                    "read or used, do not refer to it"
                )
        elif obj.id in by_object:
            line = _change_line(task_id, obj, seen_version, by_object[obj.id])
            if line:
                lines.append(line)
    if len(lines) > MAX_NOTICES:
        rest = len(lines) - MAX_NOTICES
        lines = [*lines[:MAX_NOTICES], f"and {rest} more changed object(s); list_objects shows all"]
    return lines


async def notices_for_context(session: AsyncSession, task_id: str) -> list[str]:
    """`notice_lines` read through `session`."""
    linked = await run(session, linked_query(task_id))
    versions = [await run(session, q) for q in version_queries(linked)]
    return notice_lines(linked, versions, task_id)


@dataclass(slots=True, frozen=True)
class _Linked:
    """What a notice says of an object the task references."""

    id: str
    name: str
    type: str
    version: int


def _moved(linked: Rows) -> list[tuple[_Linked, int]]:
    """The objects (not deleted) with a newer version than the one the task saw."""
    out = []
    for row in linked:
        obj, deleted, _deletion_seen, seen_version = _Linked(*row[:4]), *row[4:]
        seen = seen_version or 0
        if not deleted and seen and obj.version > seen:
            out.append((obj, seen))
    return out


_LINKED = (
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
_VERSIONS = select(ObjectVersion.version, ObjectVersion.created_by, ObjectVersion.content).where(
    ObjectVersion.object_id == bindparam("object_id"),
    ObjectVersion.version >= bindparam("seen"),
    ObjectVersion.version <= bindparam("current"),
)


def _change_line(task_id: str, obj: _Linked, seen: int, versions: Rows) -> str | None:
    own = f"task:{task_id}:"
    newer = [by for v, by, _ in versions if v > seen]
    others = sorted({describe_author(a) for a in newer if not a.startswith(own)})
    if not others:
        return None  # only this task's own writes: nothing it does not know
    content = {v: c for v, _, c in versions}
    old, cur = content.get(seen), content.get(obj.version)
    what = (
        summarize_change(obj.type, old, cur) if old is not None and cur is not None else "changed"
    )
    return (
        f"{obj.name} ({obj.id}) v{seen} → v{obj.version} (by {', '.join(others)}): {what}; "
        "re-read it before editing"
    )

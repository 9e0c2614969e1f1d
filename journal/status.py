"""A task's status change as the step's storage writes it: one conditional UPDATE, its
`task.status` event only when it changed the row, the kind the workflow holds, and, for a
terminal status, the task's open cards expired."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from journal import statements as st
from journal.backend import Batch
from journal.types import StatusChange
from lomo.db.query import Query
from lomo.events import event_queries

TERMINAL_TASK_STATUSES = ("stopped", "completed", "failed", "archived")


async def write_changes(
    batch: Batch, change: StatusChange, at: datetime, pipelined: bool, check_task: bool = False
) -> set[str]:
    """Write `change` in the batch's transaction; the persons whose streams to wake (none
    when nothing changed). On Postgres the UPDATE and its event are one statement; elsewhere
    the event follows when the UPDATE returned the row. `check_task`: a task that does not
    exist raises `LookupError` (an unchanged status is not an error)."""
    shape = (bool(change.kind), bool(change.only_before_turn), bool(change.only_at_turn))
    params: dict[str, Any] = {
        "p_id": change.task_id,
        "p_status": change.status,
        "p_reason": change.reason,
        "p_at": at,
        "p_kind": change.kind,
        "p_before": change.only_before_turn,
        "p_turn": change.only_at_turn,
    }
    data = {"task_id": change.task_id, "status": change.status, "reason": change.reason}
    after: list[Query] = []
    if change.kind:  # the kind also when the status is unchanged
        after.append(Query(st.SET_KIND, {"p_id": change.task_id, "p_kind": change.kind}))
    if check_task:
        after.append(Query(st.TASK_EXISTS, {"p_id": change.task_id}))
    if pipelined:
        event = {"p_type": "task.status", "p_data": data, "p_ev_at": at}
        got = await batch(Query(st.status_with_event(*shape), {**params, **event}), *after)
        changed = {str(r[0]) for r in got[0]}
    else:
        got = await batch(Query(st.status_update(*shape), params), *after)
        changed = {str(r[0]) for r in got[0]}
        for user_id in changed:
            await batch(*event_queries(user_id, "task.status", data, at))
    if check_task and not got[-1]:
        raise LookupError(f"no task {change.task_id}")
    if changed and change.status in TERMINAL_TASK_STATUSES:
        # What can be cancelled is: open questions to the person expire.
        await batch(Query(st.EXPIRE_CARDS, {"p_id": change.task_id}))
    return changed

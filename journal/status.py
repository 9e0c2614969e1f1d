"""A task's status change as the step's storage writes it: one conditional UPDATE, its
`task.status` event only when it changed the row (and then a presented result's
`task.reply`), the kind the workflow holds, and, for a terminal status, the task's open
cards expired."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from journal import statements as st
from journal.backend import Batch
from journal.types import StatusChange
from lomo.db.query import Query, Rows
from lomo.events import event_queries
from lomo.states import TERMINAL_TASK, EventType


async def write_changes(
    batch: Batch, change: StatusChange, at: datetime, pipelined: bool, check_task: bool = False
) -> set[str]:
    """Write `change` in the batch's transaction; the persons whose streams to wake (none
    when nothing changed). On Postgres the UPDATE and its event are one statement
    (`pipelined_status`); elsewhere the event follows when the UPDATE returned the row.
    `check_task`: a task that does not exist raises `LookupError` (an unchanged status is
    not an error)."""
    if pipelined:
        queries = pipelined_status(change, at, check_task)
        changed = status_changed(await batch(*queries), change, check_task)
    else:
        params, data = _values(change, at)
        update = Query(st.status_update(*_shape(change)), params)
        got = await batch(update, *_after(change, check_task))
        changed = status_changed(got, change, check_task)
        for user_id in changed:
            await batch(*event_queries(user_id, EventType.TASK_STATUS, data, at))
    if change.reply is not None:
        for user_id in changed:
            await batch(*event_queries(user_id, EventType.TASK_REPLY, change.reply, at))
    # A person's stop, an archive and a lightweight task's completion end the workflow; a
    # change to one of them expires the task's open cards.
    if changed and change.status in TERMINAL_TASK:
        # What can be cancelled is: open questions to the person expire.
        await batch(Query(st.EXPIRE_CARDS, {"p_id": change.task_id}))
    return changed


def pipelined_status(change: StatusChange, at: datetime, check_task: bool = False) -> list[Query]:
    """Postgres: the change and its event as statements to send in one batch (a step's
    commit sends them after marking its messages); `status_changed` reads their rows."""
    params, data = _values(change, at)
    event = {"p_type": EventType.TASK_STATUS, "p_data": data, "p_ev_at": at}
    cte = Query(st.status_with_event(*_shape(change)), {**params, **event})
    return [cte, *_after(change, check_task)]


def status_changed(got: list[Rows], change: StatusChange, check_task: bool) -> set[str]:
    """The persons whose task's status changed, from the rows of the change's statements
    (the first one's returns them; with `check_task` the last one's finds the task)."""
    if check_task and not got[-1]:
        raise LookupError(f"no task {change.task_id}")
    return {str(r[0]) for r in got[0]}


def _shape(change: StatusChange) -> st.Shape:
    turns = bool(change.only_before_turn), bool(change.only_at_turn)
    return bool(change.kind), *turns, bool(change.fence)


def _values(change: StatusChange, at: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
    params = {
        "p_id": change.task_id,
        "p_status": change.status,
        "p_reason": change.reason,
        "p_at": at,
        "p_kind": change.kind,
        "p_before": change.only_before_turn,
        "p_turn": change.only_at_turn,
        "p_fence": change.fence,
    }
    return params, {"task_id": change.task_id, "status": change.status, "reason": change.reason}


def _after(change: StatusChange, check_task: bool) -> list[Query]:
    after: list[Query] = []
    if change.kind:  # the kind also when the status is unchanged
        after.append(Query(st.SET_KIND, {"p_id": change.task_id, "p_kind": change.kind}))
    if check_task:
        after.append(Query(st.TASK_EXISTS, {"p_id": change.task_id}))
    return after

"""The runtime's reads and writes: the statements an agent step runs, built once (issue 14).

Reads and writes are `HotQuery`s (lomo/db/hot.py), sent together with `execute_all` where
they do not depend on each other; the writes' parameters are named apart from the columns
(a key naming a column is a value to set). The status write, the turn's state and the
turn-end verdict's status live here because both activities of a step run them inside
their own transactions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Table, bindparam, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.exceptions import ApplicationError

from activities.types import TERMINAL_TASK_STATUSES, StatusInput, TurnSnapshot, TurnState
from journal.rows import load_card_rows, load_item_rows
from lomo import clock
from lomo.db.hot import Bound, HotQuery, execute_all
from lomo.db.models import Card, MessageRow, ModelStep, Task, ToolCall
from lomo.events import append_event, event_after, ring_on_commit
from tools.checklist import CLOSED
from workflows.stopcheck import WAITS_FOR_PERSON, end_facts, stop_check

_MESSAGE_TEXTS = HotQuery(
    select(MessageRow.text).where(MessageRow.id.in_(bindparam("ids", expanding=True)))
)
STORED_STEP = HotQuery(
    select(ModelStep.id, ModelStep.response).where(
        ModelStep.task_id == bindparam("task_id"),
        ModelStep.turn == bindparam("turn"),
        ModelStep.step == bindparam("step"),
    )
)


def retrieval_query(goal: str, texts: list[str]) -> str:
    """What memory is retrieved for: the task's goal and the person's newest words."""
    return "\n".join([goal, *texts])[:2000]


def message_texts(message_ids: list[str]) -> Bound:
    return _MESSAGE_TEXTS.bind(ids=message_ids)


async def steps_upto(s: AsyncSession, task_id: str, step_id: int | None) -> int:
    """How many steps the task has (up to and including step `step_id`)."""
    q = select(func.count()).select_from(ModelStep).where(ModelStep.task_id == task_id)
    if step_id is not None:
        q = q.where(ModelStep.id <= step_id)
    return int(await s.scalar(q) or 0)


def _status_write(s: AsyncSession, inp: StatusInput, at: datetime) -> tuple[Bound, bool]:
    """The status UPDATE with its values; with its event in the same statement (True) for a
    non-terminal status on Postgres."""
    params: dict[str, Any] = {
        "p_id": inp.task_id,
        "p_status": inp.status,
        "p_reason": inp.reason,
        "p_at": at,
        "p_kind": inp.kind,
        "p_before": inp.only_before_turn,
        "p_turn": inp.only_at_turn,
    }
    shape = (bool(inp.kind), bool(inp.only_before_turn), bool(inp.only_at_turn))
    if inp.status in TERMINAL_TASK_STATUSES or s.get_bind().dialect.name != "postgresql":
        return _status_update(*shape).bind(**params), False
    params.update(p_type="task.status", p_data=_status_event(inp), p_ev_at=at)
    return _status_update(*shape, with_event=True).bind(**params), True


def _status_event(inp: StatusInput) -> dict[str, Any]:
    return {"task_id": inp.task_id, "status": inp.status, "reason": inp.reason}


def status_batch(s: AsyncSession, inp: StatusInput, at: datetime) -> list[Bound]:
    """The status write as `write_status(s, inp, at)` sends it, to lead a batch of reads
    (`prefetched`): where it is one statement (Postgres), the call inside the batch is then
    answered from it, and the change costs no round trip of its own."""
    write, one_statement = _status_write(s, inp, at)
    return [write] if one_statement else []


async def write_status(
    s: AsyncSession, inp: StatusInput, at: datetime | None = None, *, commit: bool = False
) -> None:
    """A status change is one conditional UPDATE (it runs twice per turn): the row is read
    only when nothing changed, to tell "unchanged" from "no such task". `commit`: the write
    is the session's last, and commits its transaction in the same round trip (Postgres,
    `execute_all`); only for a change without a kind and to a status that is not terminal,
    which write nothing more."""
    if s.new or s.dirty or s.deleted:
        await s.flush()  # the caller's rows first: locks in the order every writer keeps
    write, with_event = _status_write(s, inp, at or clock.now())
    if commit:
        if inp.kind or inp.status in TERMINAL_TASK_STATUSES:
            raise ValueError("a status write with more to write cannot commit")
        (changed,) = await execute_all(s, write, commit=True)
    else:
        # `rows`, not execute_all: inside a batch led by this write it answers from that.
        changed = await write.query.rows(s, **write.params)
    if with_event and changed:
        # The UPDATE and its event in one statement (one round trip less, twice a turn).
        ring_on_commit(s, changed[0][0])
        return
    if not changed:
        # Committed already: the row cannot change under us any more, nothing to lock.
        task = await s.get(Task, inp.task_id, with_for_update=not commit)
        if task is None:
            raise ApplicationError(f"no task {inp.task_id}", non_retryable=True)
        if inp.kind and task.kind != inp.kind:
            task.kind = inp.kind
        return
    if inp.status in TERMINAL_TASK_STATUSES:
        # What can be cancelled is: open questions to the person expire.
        await s.execute(
            update(Card)
            .where(Card.task_id == inp.task_id, Card.status == "open")
            .values(status="expired")
        )
    await append_event(s, changed[0][0], "task.status", _status_event(inp))


async def end_status(
    s: AsyncSession,
    task_id: str,
    turn: int,
    snap: TurnSnapshot,
    state: TurnState,
    *,
    progress: bool,
    new_order: str | None = None,
    new_card: str | None = None,
    commit: bool = False,
) -> str:
    """The activity that ended the turn writes the status of a verdict that waits for the
    person: the person sees it one local activity earlier. The workflow reaches the same
    verdict on the same facts; if something arrived meanwhile (a message, a stop) it goes
    on from the status written here. `commit`: as in `write_status`."""
    facts = end_facts(snap, state, progress=progress, new_order=new_order, new_card=new_card)
    if stop_check(facts).action not in WAITS_FOR_PERSON:
        return ""
    # No kind: a promotion the api or routing wrote meanwhile is not undone (the workflow
    # writes its kind itself if it changed since the snapshot).
    status = StatusInput(task_id, "waiting_user", only_at_turn=turn)
    await write_status(s, status, commit=commit)
    return "waiting_user"


async def read_turn_state(s: AsyncSession, task_id: str, turn: int) -> TurnState:
    """The checklist summary the stop-check needs, read from the DB."""
    items = await load_item_rows(s, task_id)
    cards = await load_card_rows(s, task_id)
    open_cards = sorted(c.id for c in cards if c.status == "open")
    decided = {str((c.payload or {}).get("item_id")) for c in cards if c.status != "expired"}
    state = TurnState(
        checklist_total=len(items),
        checklist_open=sum(i.status not in CLOSED for i in items),
        blocked=next((f"{i.title}: {i.note}" for i in items if i.status == "blocked"), ""),
        progress=any(i.done_turn == turn for i in items),
        open_cards=open_cards,
    )
    # The current step is the first one not closed; it is a checkpoint when it needs the
    # person and no card asks about it yet.
    current = next((i for i in items if i.status not in CLOSED), None)
    if current and current.requires_confirmation and current.id not in decided:
        state.checkpoint_due = current.id
    return state


# The step's writes are Core statements built once and run as `HotQuery`s: the ORM's DML
# path (session layer, synchronize_session) cost 0.6 ms of CPU more per statement (issue 14).
# Parameters are named apart from the columns (a key naming a column is a value to set).
_TASKS: Table = Task.__table__  # type: ignore[assignment]
_MESSAGES: Table = MessageRow.__table__  # type: ignore[assignment]
_STEPS: Table = ModelStep.__table__  # type: ignore[assignment]
_CALLS: Table = ToolCall.__table__  # type: ignore[assignment]
_STATUS_UPDATES: dict[tuple[bool, bool, bool, bool], HotQuery] = {}
STORE_STEP = HotQuery(
    insert(_STEPS).values(
        task_id=bindparam("p_task"),
        turn=bindparam("p_turn"),
        step=bindparam("p_step"),
        context=bindparam("p_context", type_=_STEPS.c.context.type),
        response=bindparam("p_response", type_=_STEPS.c.response.type),
        reported_orders=bindparam("p_reported", type_=_STEPS.c.reported_orders.type),
        created_at=bindparam("p_at"),
    )
)
MARK_PROCESSED = HotQuery(
    update(_MESSAGES)
    .where(_MESSAGES.c.id.in_(bindparam("p_ids", expanding=True)))
    .values(
        processed_turn=bindparam("p_turn"),
        processed_step=bindparam("p_step"),
        task_id=bindparam("p_task"),
    )
)
TASK_TURN = HotQuery(
    update(_TASKS)
    .where(_TASKS.c.id == bindparam("p_task"))
    .values(turn=bindparam("p_turn"), updated_at=bindparam("p_at"))
)
PLAN_CALL = HotQuery(
    insert(_CALLS).values(
        call_id=bindparam("p_id"),
        task_id=bindparam("p_task"),
        tool_use_id=bindparam("p_use"),
        name=bindparam("p_name"),
        input=bindparam("p_input", type_=_CALLS.c.input.type),
        status="planned",
        created_at=bindparam("p_at"),
        updated_at=bindparam("p_at"),
    )
)


def _status_update(kind: bool, before: bool, at: bool, with_event: bool = False) -> HotQuery:
    """The status UPDATE of one shape (with a kind, guarded by the turn before or at); with
    its event appended in the same statement (Postgres)."""
    got = _STATUS_UPDATES.get((kind, before, at, with_event))
    if got is not None:
        return got
    t = _TASKS.c
    where = [
        t.id == bindparam("p_id"),
        or_(t.status != bindparam("p_status"), t.status_reason != bindparam("p_reason")),
    ]
    if before:
        where.append(t.turn < bindparam("p_before"))
    if at:
        where.append(t.turn == bindparam("p_turn"))
    values: dict[str, Any] = {
        "status": bindparam("p_status"),
        "status_reason": bindparam("p_reason"),
        "updated_at": bindparam("p_at"),
    }
    if kind:
        values["kind"] = bindparam("p_kind")
    stmt = update(_TASKS).where(*where).values(**values).returning(t.user_id)
    q = event_after(stmt.cte("changed")) if with_event else HotQuery(stmt)
    _STATUS_UPDATES[(kind, before, at, with_event)] = q
    return q


# The call's journal row, locked (one attempt at a time past this point), with its person.
_CALL_ROW = (
    select(ToolCall.status, ToolCall.result, ToolCall.name, ToolCall.input, Task.user_id)
    .join(Task, Task.id == ToolCall.task_id)
    .where(ToolCall.call_id == bindparam("call_id"))
)
LOCK_CALL = HotQuery(_CALL_ROW.with_for_update(of=ToolCall))
# The same row unlocked: for an idempotent tool, which may run twice.
READ_CALL = HotQuery(_CALL_ROW)
# A call waiting for the person's confirmation is not final: it runs again once answered.
FINAL_CALL = ("done", "error", "outcome_unknown")
# `started`, unless the call has its final result: sent in one round trip with LOCK_CALL
# (the lock is taken first, in the same transaction), it changes the row exactly when the
# attempt goes on to run the tool.
START_CALL = HotQuery(
    update(_CALLS)
    .where(
        _CALLS.c.call_id == bindparam("p_id"),
        or_(
            _CALLS.c.result.is_(None),
            _CALLS.c.status.not_in(bindparam("p_final", FINAL_CALL, expanding=True)),
        ),
    )
    .values(status=bindparam("p_status", "started"), updated_at=bindparam("p_at"))
)
# The call's result, unless an attempt stored its final result first: then no row comes
# back. The UPDATE takes the row's lock itself (a concurrent attempt's waits, and sees the
# final result once that commits), so no `LOCK_CALL` round trip goes before it.
CALL_RESULT = HotQuery(
    update(_CALLS)
    .where(
        _CALLS.c.call_id == bindparam("p_id"),
        or_(
            _CALLS.c.result.is_(None),
            _CALLS.c.status.not_in(bindparam("p_final", FINAL_CALL, expanding=True)),
        ),
    )
    .values(
        status=bindparam("p_status"),
        result=bindparam("p_result", type_=_CALLS.c.result.type),
        updated_at=bindparam("p_at"),
    )
    .returning(_CALLS.c.call_id)
)

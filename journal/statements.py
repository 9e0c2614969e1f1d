"""The statements of the agent step's storage, built once on the Core tables.

Both backends run the same statements; parameters are named apart from the columns (a key
naming a column would be taken as a value to set), and every column a write fills is set
explicitly (the Postgres backend runs no Python-side defaults).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Table,
    and_,
    bindparam,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert

from flows.models import FlowRun
from lomo.db.context import ContextSegment, ToolOutput
from lomo.db.models import (
    Card,
    ChecklistItem,
    GenerationOrder,
    MessageRow,
    ModelStep,
    Task,
    ToolCall,
    WorkObject,
)
from lomo.db.query import in_list
from lomo.events import event_after
from lomo.states import CardStatus

TASKS: Table = Task.__table__  # type: ignore[assignment]
MESSAGES: Table = MessageRow.__table__  # type: ignore[assignment]
STEPS: Table = ModelStep.__table__  # type: ignore[assignment]
CALLS: Table = ToolCall.__table__  # type: ignore[assignment]
OUTPUTS: Table = ToolOutput.__table__  # type: ignore[assignment]
CARDS: Table = Card.__table__  # type: ignore[assignment]

# --- a step's reads ----------------------------------------------------------------------
TASK_HEAD = select(
    Task.id,
    Task.user_id,
    Task.kind,
    Task.language,
    Task.goal,
    Task.briefing,
    Task.turn,
    Task.status,
).where(Task.id == bindparam("task_id"))
STORED_STEP = select(ModelStep.id, ModelStep.response).where(
    ModelStep.task_id == bindparam("task_id"),
    ModelStep.turn == bindparam("turn"),
    ModelStep.step == bindparam("step"),
)
MESSAGE_TEXTS = select(MessageRow.id, MessageRow.text).where(in_list(MessageRow.id, "ids"))
# Every step of the task without its stored context and response (a stored context holds
# the whole text it was sent: loading it for every earlier step would be quadratic).
STEP_HEADS = (
    select(
        ModelStep.id,
        ModelStep.turn,
        ModelStep.step,
        ModelStep.created_at,
        ModelStep.reported_orders,
    )
    .where(ModelStep.task_id == bindparam("task_id"))
    .order_by(ModelStep.id)
)
# The last step's prefix record, by its id found in the query itself.
LAST_PREFIX = select(ModelStep.context["prefix"]).where(
    ModelStep.id
    == select(func.max(ModelStep.id))
    .where(ModelStep.task_id == bindparam("task_id"))
    .scalar_subquery()
)
SUMMARIES = select(
    ContextSegment.segment,
    ContextSegment.first_step,
    ContextSegment.last_step,
    ContextSegment.text,
).where(ContextSegment.task_id == bindparam("task_id"), ContextSegment.status == "active")
ITEMS = (
    select(
        ChecklistItem.id,
        ChecklistItem.title,
        ChecklistItem.status,
        ChecklistItem.requires_confirmation,
        ChecklistItem.artifacts,
        ChecklistItem.note,
        ChecklistItem.done_turn,
    )
    .where(ChecklistItem.task_id == bindparam("task_id"))
    .order_by(ChecklistItem.position)
)
TASK_CARDS = select(
    Card.id, Card.kind, Card.status, Card.title, Card.payload, Card.answer, Card.answered_at
).where(Card.task_id == bindparam("task_id"))
ORDERS = select(
    GenerationOrder.id,
    GenerationOrder.idempotency_key,
    GenerationOrder.status,
    GenerationOrder.object_id,
    GenerationOrder.error,
    GenerationOrder.params,
).where(GenerationOrder.task_id == bindparam("task_id"))
RECENT_ASSETS = (
    select(WorkObject.id, WorkObject.name, WorkObject.created_at)
    .where(WorkObject.user_id == bindparam("user_id"), WorkObject.type == "asset")
    .where(WorkObject.deleted.is_(False))
    .order_by(WorkObject.created_at.desc())
    .limit(5)
)
HAS_RUNS = select(FlowRun.id).where(FlowRun.task_id == bindparam("task_id")).limit(1)
RESPONSES = select(ModelStep.id, ModelStep.response).where(in_list(ModelStep.id, "ids"))
# The calls of the steps a context shows, with their bodies: a call is planned with its step,
# in its transaction and with its time, so those from the earliest shown step's time on hold
# them all (less a margin). A long task's older calls stay in the database.
WINDOW_CALLS = select(
    ToolCall.call_id,
    ToolCall.tool_use_id,
    ToolCall.name,
    ToolCall.status,
    ToolCall.input,
    ToolCall.result,
).where(ToolCall.task_id == bindparam("task_id"), ToolCall.created_at >= bindparam("since"))
# The domains the step that planned a call could see (its prefix record).
STEP_DOMAINS = select(ModelStep.context["prefix"]["domains"]).where(
    ModelStep.task_id == bindparam("task_id"),
    ModelStep.turn == bindparam("turn"),
    ModelStep.step == bindparam("step"),
)

_MESSAGE_WINDOWS: dict[tuple[bool, bool, bool], Any] = {}


def message_window(ids: bool, from_turn: bool, opening: bool) -> Any:
    """The messages a context shows: those not processed yet, and (each when asked for)
    the step's own `ids`, those processed from `from_turn` on, the opening request's
    (`open_turn`, `open_step`). One statement per shape, built when first used."""
    shape = (ids, from_turn, opening)
    got = _MESSAGE_WINDOWS.get(shape)
    if got is not None:
        return got
    shown: list[ColumnElement[bool]] = [MessageRow.processed_turn.is_(None)]
    if ids:
        shown.append(in_list(MessageRow.id, "ids"))
    if from_turn:
        shown.append(MessageRow.processed_turn >= bindparam("from_turn"))
    if opening:
        shown.append(
            and_(
                MessageRow.processed_turn == bindparam("open_turn"),
                MessageRow.processed_step == bindparam("open_step"),
            )
        )
    stmt = select(
        MessageRow.id,
        MessageRow.text,
        MessageRow.processed_turn,
        MessageRow.processed_step,
        MessageRow.created_at,
        MessageRow.target,
    ).where(MessageRow.task_id == bindparam("task_id"), or_(*shown))
    _MESSAGE_WINDOWS[shape] = stmt
    return stmt


# --- a step's writes ---------------------------------------------------------------------
STORE_STEP = insert(STEPS).values(
    task_id=bindparam("p_task"),
    turn=bindparam("p_turn"),
    step=bindparam("p_step"),
    context=bindparam("p_context", type_=STEPS.c.context.type),
    response=bindparam("p_response", type_=STEPS.c.response.type),
    reported_orders=bindparam("p_reported", type_=STEPS.c.reported_orders.type),
    created_at=bindparam("p_at"),
)
MARK_PROCESSED = (
    update(MESSAGES)
    .where(in_list(MESSAGES.c.id, "p_ids"))
    .values(
        processed_turn=bindparam("p_turn"),
        processed_step=bindparam("p_step"),
        task_id=bindparam("p_task"),
    )
)
TASK_TURN = (
    update(TASKS)
    .where(TASKS.c.id == bindparam("p_task"))
    .values(turn=bindparam("p_turn"), updated_at=bindparam("p_at"))
)
PLAN_CALL = insert(CALLS).values(
    call_id=bindparam("p_id"),
    task_id=bindparam("p_task"),
    tool_use_id=bindparam("p_use"),
    name=bindparam("p_name"),
    input=bindparam("p_input", type_=CALLS.c.input.type),
    status="planned",
    created_at=bindparam("p_at"),
    updated_at=bindparam("p_at"),
)

# --- a tool call's journal ---------------------------------------------------------------
# A call waiting for the person's confirmation is not final: it runs again once answered.
FINAL_CALL = ("done", "error", "outcome_unknown")
_CALL_ROW = (
    select(ToolCall.status, ToolCall.result, ToolCall.name, ToolCall.input, Task.user_id)
    .join(Task, Task.id == ToolCall.task_id)
    .where(ToolCall.call_id == bindparam("call_id"))
)
# Locked: one attempt at a time past this point.
LOCK_CALL = _CALL_ROW.with_for_update(of=ToolCall)
# Unlocked: for an idempotent tool, which may run twice.
READ_CALL = _CALL_ROW
_NOT_FINAL = or_(CALLS.c.result.is_(None), and_(*(CALLS.c.status != f for f in FINAL_CALL)))
# `started`, unless the call has its final result: it changes the row exactly when the
# attempt goes on to run the tool (sent after the lock, in its transaction).
START_CALL = (
    update(CALLS)
    .where(CALLS.c.call_id == bindparam("p_id"), _NOT_FINAL)
    .values(status="started", updated_at=bindparam("p_at"))
)
# The call's result, unless an attempt stored its final result first: then no row comes
# back. The UPDATE takes the row's lock itself.
CALL_RESULT = (
    update(CALLS)
    .where(CALLS.c.call_id == bindparam("p_id"), _NOT_FINAL)
    .values(
        status=bindparam("p_status"),
        result=bindparam("p_result", type_=CALLS.c.result.type),
        updated_at=bindparam("p_at"),
    )
    .returning(CALLS.c.call_id)
)
# A large output kept outside the context, once per call (a retry's insert changes nothing).
KEEP_OUTPUT = (
    pg_insert(OUTPUTS)
    .values(
        id=bindparam("p_id"),
        user_id=bindparam("p_user"),
        task_id=bindparam("p_task"),
        call_id=bindparam("p_call"),
        content=bindparam("p_content"),
        size=bindparam("p_size"),
        created_at=bindparam("p_at"),
    )
    .on_conflict_do_nothing()
)

# --- the task's status -------------------------------------------------------------------
Shape = tuple[bool, bool, bool, bool]
_STATUS_UPDATES: dict[Shape, Any] = {}


def status_update(kind: bool, before: bool, at: bool, fenced: bool = False) -> Any:
    """The status UPDATE of one shape: with a kind, guarded by the task's turn before or at
    a value, and by a fencing token (`p_fence`: refused when an equal or newer writer's is
    stored). Changes the row only if the status or its reason differ; returns the person."""
    got = _STATUS_UPDATES.get((kind, before, at, fenced))
    if got is not None:
        return got
    t = TASKS.c
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
    if fenced:
        fence = bindparam("p_fence", type_=BigInteger)
        where.append(or_(t.status_fence.is_(None), t.status_fence <= fence))
        values["status_fence"] = fence
    stmt = update(TASKS).where(*where).values(**values).returning(t.user_id)
    _STATUS_UPDATES[(kind, before, at, fenced)] = stmt
    return stmt


# A kind the workflow holds for a task whose status did not change.
SET_KIND = (
    update(TASKS)
    .where(TASKS.c.id == bindparam("p_id"), TASKS.c.kind != bindparam("p_kind"))
    .values(kind=bindparam("p_kind"))
)
TASK_EXISTS = select(Task.id).where(Task.id == bindparam("p_id"))
# A newer writer's fencing token than this one is stored.
FENCED_OUT = select(Task.id).where(
    Task.id == bindparam("p_id"), Task.status_fence > bindparam("p_fence", type_=BigInteger)
)
EXPIRE_CARDS = (
    update(CARDS)
    .where(CARDS.c.task_id == bindparam("p_id"), CARDS.c.status == CardStatus.OPEN)
    .values(status=CardStatus.EXPIRED)
)


_STATUS_EVENTS: dict[Shape, Any] = {}


def status_with_event(kind: bool, before: bool, at: bool, fenced: bool = False) -> Any:
    """Postgres: `status_update` and its `task.status` event in one statement (values
    `p_type`, `p_data`, `p_ev_at` besides the update's); returns the person if it changed."""
    got = _STATUS_EVENTS.get((kind, before, at, fenced))
    if got is None:
        got = event_after(status_update(kind, before, at, fenced).cte("changed"))
        _STATUS_EVENTS[(kind, before, at, fenced)] = got
    return got

"""The journal rows a context is built from, read as plain rows instead of ORM objects.

Every model step reads its task's steps (a task's history is its context) and the messages
and tool calls of those it shows. As ORM instances each row cost tens of microseconds
(identity map, state tracking) and a step's cost grew with the task's length: at 200 steps
the rows alone were about half of a step's CPU. Here they are plain slotted objects filled
from column tuples, with only the columns the builder reads; a step's response and its calls
are loaded only for the steps shown in full (`load_window`), so a long task's older calls
are never read. The reads are `HotQuery`s (built once; on Postgres sent on the driver,
lomo/db/hot.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import ColumnElement, and_, bindparam, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.hot import Bound, HotQuery
from lomo.db.models import (
    Card,
    ChecklistItem,
    GenerationOrder,
    MessageRow,
    ModelStep,
    Task,
    ToolCall,
)


class TaskLike(Protocol):
    """What the context builder reads of a task: a `TaskHead` or a `Task`."""

    @property
    def id(self) -> str: ...
    @property
    def user_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def language(self) -> str: ...
    @property
    def goal(self) -> str: ...
    @property
    def briefing(self) -> str: ...
    @property
    def turn(self) -> int: ...


@dataclass(slots=True)
class TaskHead:
    """The task's columns a model step reads (an ORM `Task` cost a round trip of its own)."""

    id: str
    user_id: str
    kind: str
    language: str
    goal: str
    briefing: str
    turn: int


TASK_HEAD = HotQuery(
    select(
        Task.id, Task.user_id, Task.kind, Task.language, Task.goal, Task.briefing, Task.turn
    ).where(Task.id == bindparam("task_id"))
)


class StepLike(Protocol):
    """A step as `step_line` reads it: a `StepRow` or a `ModelStep`."""

    @property
    def turn(self) -> int: ...
    @property
    def step(self) -> int: ...
    @property
    def response(self) -> dict[str, Any] | None: ...


class CallLike(Protocol):
    @property
    def call_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def result(self) -> dict[str, Any] | None: ...


class MsgLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def processed_turn(self) -> int | None: ...
    @property
    def processed_step(self) -> int | None: ...
    @property
    def created_at(self) -> datetime: ...


@dataclass(slots=True, eq=False)
class StepRow:
    id: int
    turn: int
    step: int
    created_at: datetime
    reported_orders: list[str] | None  # the finished jobs the step was shown
    response: dict[str, Any] | None = None  # loaded by `load_window`


@dataclass(slots=True, eq=False)
class CallRow:
    call_id: str
    tool_use_id: str
    name: str
    status: str
    input: dict[str, Any] | None = None  # loaded by `load_window`
    result: dict[str, Any] | None = None  # loaded by `load_window`


@dataclass(slots=True, frozen=True)
class MsgRow:
    id: str
    text: str
    processed_turn: int | None
    processed_step: int | None
    created_at: datetime


def body(step: StepLike) -> dict[str, Any]:
    """A step's response; loading it is `load_window`'s job (a step not loaded is a bug)."""
    if step.response is None:
        raise LookupError(f"the response of step {step.turn}.{step.step} was not loaded")
    return step.response


_STEPS = HotQuery(
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
_RESPONSES = HotQuery(
    select(ModelStep.id, ModelStep.response).where(
        ModelStep.id.in_(bindparam("ids", expanding=True))
    )
)
# The calls of the steps a context shows, with their bodies: a call is planned with its step,
# in its transaction and with its time, so those from the earliest shown step's time on hold
# them all (less a margin, for rows an earlier version timed one by one). A task's older calls
# stay in the database: reading every call of a long task at every step grew with its length.
_WINDOW_CALLS = HotQuery(
    select(
        ToolCall.call_id,
        ToolCall.tool_use_id,
        ToolCall.name,
        ToolCall.status,
        ToolCall.input,
        ToolCall.result,
    ).where(ToolCall.task_id == bindparam("task_id"), ToolCall.created_at >= bindparam("since"))
)
CALL_TIME_MARGIN = timedelta(seconds=1)


def journal_reads(task_id: str) -> list[Bound]:
    """The read of `load_steps`, to prefetch with a step's other reads."""
    return [_STEPS.bind(task_id=task_id)]


async def load_steps(session: AsyncSession, task_id: str) -> list[StepRow]:
    """The task's steps in order, without their context and response (a stored context holds
    the whole text it was sent: loading it for every earlier step was quadratic)."""
    return [StepRow(*r) for r in await _STEPS.rows(session, task_id=task_id)]


@dataclass(frozen=True)
class MessageWindow:
    """Which of a task's messages to read: those processed from `from_turn` on, the opening
    request's (processed at the step `opening`), those not processed yet, and `ids`."""

    from_turn: int | None
    opening: tuple[int, int] | None
    ids: list[str]


# One query per shape of window (which of its parts are given), built when first used.
_MESSAGES: dict[tuple[bool, ...], HotQuery] = {}


def _messages_query(window: MessageWindow | None) -> HotQuery:
    shape = (
        (False,)
        if window is None
        else (True, bool(window.ids), window.from_turn is not None, window.opening is not None)
    )
    q = _MESSAGES.get(shape)
    if q is not None:
        return q
    query = select(
        MessageRow.id,
        MessageRow.text,
        MessageRow.processed_turn,
        MessageRow.processed_step,
        MessageRow.created_at,
    ).where(MessageRow.task_id == bindparam("task_id"))
    if window is not None:
        shown: list[ColumnElement[bool]] = [MessageRow.processed_turn.is_(None)]
        if window.ids:
            shown.append(MessageRow.id.in_(bindparam("ids", expanding=True)))
        if window.from_turn is not None:
            shown.append(MessageRow.processed_turn >= bindparam("from_turn"))
        if window.opening is not None:
            shown.append(
                and_(
                    MessageRow.processed_turn == bindparam("open_turn"),
                    MessageRow.processed_step == bindparam("open_step"),
                )
            )
        query = query.where(or_(*shown))
    q = _MESSAGES[shape] = HotQuery(query)
    return q


def messages_read(task_id: str, window: MessageWindow | None = None) -> Bound:
    """The read of `load_messages`."""
    params: dict[str, Any] = {"task_id": task_id}
    if window is not None:
        if window.ids:
            params["ids"] = window.ids
        if window.from_turn is not None:
            params["from_turn"] = window.from_turn
        if window.opening is not None:
            params["open_turn"], params["open_step"] = window.opening
    return _messages_query(window).bind(**params)


async def load_messages(
    session: AsyncSession,
    task_id: str,
    excluded: set[str] | frozenset[str] = frozenset(),
    window: MessageWindow | None = None,
) -> dict[str, MsgRow]:
    """The task's messages (without `excluded`); with a `window`, only those in it."""
    read = messages_read(task_id, window)
    rows = await read.query.rows(session, **read.params)
    return {r[0]: MsgRow(*r) for r in rows if r[0] not in excluded}


def call_order(call_id: str) -> tuple[int, int, int]:
    """(turn, step, index) of a call, from its id `{task}:{turn}:{step}:{index}`."""
    _, turn, step, index = call_id.rsplit(":", 3)
    return int(turn), int(step), int(index)


def calls_by_step(calls: list[CallRow]) -> dict[tuple[int, int], list[CallRow]]:
    """The calls of each (turn, step)."""
    out: dict[tuple[int, int], list[CallRow]] = {}
    for c in calls:
        out.setdefault(call_order(c.call_id)[:2], []).append(c)
    return out


def _window_since(steps: list[StepRow]) -> datetime:
    return min(s.created_at for s in steps) - CALL_TIME_MARGIN


def window_reads(task_id: str, steps: list[StepRow]) -> list[Bound]:
    """The reads of `load_window`."""
    if not steps:
        return []
    return [
        _RESPONSES.bind(ids=[s.id for s in steps]),
        _WINDOW_CALLS.bind(task_id=task_id, since=_window_since(steps)),
    ]


async def load_window(session: AsyncSession, task_id: str, steps: list[StepRow]) -> list[CallRow]:
    """Fill in the response of `steps`; their calls, with input and result, in call order."""
    if not steps:
        return []
    rows = await _RESPONSES.rows(session, ids=[s.id for s in steps])
    response: dict[int, Any] = {i: r for i, r in rows}
    for st in steps:
        st.response = response[st.id]
    shown = {(s.turn, s.step) for s in steps}
    since = _window_since(steps)
    calls = [
        CallRow(cid, use, name, status, inp, res)
        for cid, use, name, status, inp, res in await _WINDOW_CALLS.rows(
            session, task_id=task_id, since=since
        )
        if call_order(cid)[:2] in shown
    ]
    return sorted(calls, key=lambda c: call_order(c.call_id))


# --- the task's state every step reads (the dynamic tail, the turn's state) ---------------
# The statuses that close a checklist step (the others: open, in_progress, blocked).
CLOSED = ("done", "skipped")


@dataclass(slots=True, frozen=True)
class ItemRow:
    id: str
    title: str
    status: str
    requires_confirmation: bool
    artifacts: list[str]
    note: str
    done_turn: int | None


@dataclass(slots=True, frozen=True)
class CardRow:
    id: str
    kind: str
    status: str
    title: str
    payload: dict[str, Any] | None
    answer: dict[str, Any] | None
    answered_at: datetime | None


@dataclass(slots=True, frozen=True)
class OrderRow:
    id: str
    idempotency_key: str
    status: str
    object_id: str | None
    error: str | None


_ITEMS = HotQuery(
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
_CARDS = HotQuery(
    select(
        Card.id, Card.kind, Card.status, Card.title, Card.payload, Card.answer, Card.answered_at
    ).where(Card.task_id == bindparam("task_id"))
)
_ORDERS = HotQuery(
    select(
        GenerationOrder.id,
        GenerationOrder.idempotency_key,
        GenerationOrder.status,
        GenerationOrder.object_id,
        GenerationOrder.error,
    ).where(GenerationOrder.task_id == bindparam("task_id"))
)


def state_reads(task_id: str) -> list[Bound]:
    """The reads of `load_item_rows` and `load_card_rows` (the turn's state reads both)."""
    return [_ITEMS.bind(task_id=task_id), _CARDS.bind(task_id=task_id)]


def order_read(task_id: str) -> Bound:
    return _ORDERS.bind(task_id=task_id)


async def load_item_rows(session: AsyncSession, task_id: str) -> list[ItemRow]:
    """The checklist in order, to read (the tools that change it load `ChecklistItem`s)."""
    return [ItemRow(*r) for r in await _ITEMS.rows(session, task_id=task_id)]


async def load_card_rows(session: AsyncSession, task_id: str) -> list[CardRow]:
    return [CardRow(*r) for r in await _CARDS.rows(session, task_id=task_id)]


async def load_order_rows(session: AsyncSession, task_id: str) -> list[OrderRow]:
    return [OrderRow(*r) for r in await _ORDERS.rows(session, task_id=task_id)]

"""The journal rows a context is built from, read as plain rows instead of ORM objects.

Every model step reads all of its task's steps, messages and tool calls (a task's history
is its context). As ORM instances each row cost tens of microseconds (identity map, state
tracking) and a step's cost grew with the task's length: at 200 steps the rows alone were
about half of a step's CPU. Here they are plain slotted objects filled from column tuples,
with only the columns the builder reads; a step's response and a call's input and result
are loaded only for the steps shown in full (`load_bodies`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import MessageRow, ModelStep, ToolCall


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
    response: dict[str, Any] | None = None  # loaded by `load_bodies`


@dataclass(slots=True, eq=False)
class CallRow:
    call_id: str
    tool_use_id: str
    name: str
    status: str
    input: dict[str, Any] | None = None  # loaded by `load_bodies`
    result: dict[str, Any] | None = None  # loaded by `load_bodies`


@dataclass(slots=True, frozen=True)
class MsgRow:
    id: str
    text: str
    processed_turn: int | None
    processed_step: int | None
    created_at: datetime


def body(step: StepLike) -> dict[str, Any]:
    """A step's response; loading it is `load_bodies`' job (a step not loaded is a bug)."""
    if step.response is None:
        raise LookupError(f"the response of step {step.turn}.{step.step} was not loaded")
    return step.response


async def load_steps(session: AsyncSession, task_id: str) -> list[StepRow]:
    """The task's steps in order, without their context and response (a stored context holds
    the whole text it was sent: loading it for every earlier step was quadratic)."""
    rows = await session.execute(
        select(
            ModelStep.id,
            ModelStep.turn,
            ModelStep.step,
            ModelStep.created_at,
            ModelStep.reported_orders,
        )
        .where(ModelStep.task_id == task_id)
        .order_by(ModelStep.id)
    )
    return [StepRow(*r) for r in rows]


@dataclass(frozen=True)
class MessageWindow:
    """Which of a task's messages to read: those processed from `from_turn` on, the opening
    request's (processed at the step `opening`), those not processed yet, and `ids`."""

    from_turn: int | None
    opening: tuple[int, int] | None
    ids: list[str]


async def load_messages(
    session: AsyncSession,
    task_id: str,
    excluded: set[str] | frozenset[str] = frozenset(),
    window: MessageWindow | None = None,
) -> dict[str, MsgRow]:
    """The task's messages (without `excluded`); with a `window`, only those in it."""
    query = select(
        MessageRow.id,
        MessageRow.text,
        MessageRow.processed_turn,
        MessageRow.processed_step,
        MessageRow.created_at,
    ).where(MessageRow.task_id == task_id)
    if window is not None:
        shown: list[ColumnElement[bool]] = [MessageRow.processed_turn.is_(None)]
        if window.ids:
            shown.append(MessageRow.id.in_(window.ids))
        if window.from_turn is not None:
            shown.append(MessageRow.processed_turn >= window.from_turn)
        if window.opening is not None:
            turn, step = window.opening
            shown.append(and_(MessageRow.processed_turn == turn, MessageRow.processed_step == step))
        query = query.where(or_(*shown))
    rows = await session.execute(query)
    return {r[0]: MsgRow(*r) for r in rows if r[0] not in excluded}


async def load_calls(session: AsyncSession, task_id: str) -> list[CallRow]:
    rows = await session.execute(
        select(ToolCall.call_id, ToolCall.tool_use_id, ToolCall.name, ToolCall.status).where(
            ToolCall.task_id == task_id
        )
    )
    return [CallRow(*r) for r in rows]


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


async def load_bodies(
    session: AsyncSession, steps: list[StepRow], calls_by_step: dict[tuple[int, int], list[CallRow]]
) -> None:
    """Fill in the response of `steps` and the input and result of their calls."""
    if not steps:
        return
    rows = await session.execute(
        select(ModelStep.id, ModelStep.response).where(ModelStep.id.in_([s.id for s in steps]))
    )
    response: dict[int, Any] = dict(rows.all())
    for st in steps:
        st.response = response[st.id]
    calls = {c.call_id: c for st in steps for c in calls_by_step.get((st.turn, st.step), [])}
    if not calls:
        return
    got = await session.execute(
        select(ToolCall.call_id, ToolCall.input, ToolCall.result).where(
            ToolCall.call_id.in_(list(calls))
        )
    )
    for cid, inp, res in got:
        calls[cid].input, calls[cid].result = inp, res

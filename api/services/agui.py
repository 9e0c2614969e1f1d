"""`POST /v1/ag-ui`: an AG-UI run over Lomo's durable event log.

`begin` does what the input asks (a message through the unified entry or to a task, or
the answers to a run's interrupts under the card rules) before anything is streamed, so a
refused input is an ordinary error response. `stream` then tells the run from the log
(`api/services/agui_run.py`) until its turn ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

from ag_ui.core import BaseEvent, RunAgentInput, RunStartedEvent, TextMessageEndEvent
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from api.schemas.cards import CardActionIn
from api.schemas.messages import MessageIn
from api.services import cards, messages
from api.services.agui_run import AgUiRun, ToolCallRow
from api.services.card_effects import HandoffState
from api.services.tasks import task_detail
from cards.store import get_card
from journal.statements import FINAL_CALL
from lomo import clock
from lomo.db.models import Event, MessageRow, ToolCall, User
from lomo.errors import InvalidInput
from lomo.events import BELL, events_after
from lomo.states import CardAction, CardKind, CardStatus, EventType

MAIN_THREAD = "main"


@dataclass
class Started:
    run: AgUiRun
    after: int  # the log is told from the event after this sequence number
    since: datetime  # tool calls planned from this time on belong to the run


async def begin(state: HandoffState, user: User, channel: str, inp: RunAgentInput) -> Started:
    if inp.resume:
        return await _resume(state, user, channel, inp)
    text = _last_user_text(inp)
    body = MessageIn(text=text, client_message_id=f"ag-ui:{inp.run_id}")
    if inp.thread_id != MAIN_THREAD:
        body.task_id = inp.thread_id
    accepted = await messages.accept_message(
        state.db, state.temporal, state.settings, user, body, channel
    )
    run = AgUiRun(inp.thread_id, inp.run_id, accepted.message_id)
    async with state.db.session() as s:
        msg = await s.get(MessageRow, accepted.message_id)
        after = await _received_before(s, user.id, accepted.message_id)
    if msg is None:
        raise InvalidInput(f"message {accepted.message_id} is gone")
    run.task_id = msg.task_id
    return Started(run, after, msg.created_at)


def _last_user_text(inp: RunAgentInput) -> str:
    for m in reversed(inp.messages):
        if m.role != "user":
            continue
        content = m.content
        if isinstance(content, str):
            text = content
        else:
            text = "\n".join(str(getattr(p, "text", "")) for p in content).strip()
        if text.strip():
            return text
    raise InvalidInput("the input has no user message with text to send")


async def _received_before(s: AsyncSession, user_id: str, message_id: str) -> int:
    """The sequence number just before the message's `message.received` event: a repeated
    input (the same runId) is told again from its start."""
    rows = await s.execute(
        select(Event.seq, Event.data)
        .where(Event.user_id == user_id, Event.type == EventType.MESSAGE_RECEIVED)
        .order_by(Event.seq.desc())
        .limit(500)
    )
    for seq, data in rows:
        if data.get("message_id") == message_id:
            return int(seq) - 1
    raise InvalidInput(f"message {message_id} has no received event")


async def _resume(state: HandoffState, user: User, channel: str, inp: RunAgentInput) -> Started:
    """Each resume entry answers the card its interrupt named, exactly as
    `POST /v1/cards/{id}/actions` would (only the person's app confirms money and loss)."""
    assert inp.resume is not None
    async with state.db.session() as s:
        after = int(await s.scalar(select(User.event_seq).where(User.id == user.id)) or 0)
    run = AgUiRun(inp.thread_id, inp.run_id, None)
    for entry in inp.resume:
        payload = entry.payload if isinstance(entry.payload, dict) else {}
        resolved = entry.status == "resolved"
        action = payload.get("action") or (CardAction.CONFIRM if resolved else CardAction.REJECT)
        if entry.status == "cancelled":
            action = CardAction.REJECT
        try:
            answer = CardActionIn.model_validate(
                {
                    "action": action,
                    "option_id": payload.get("option_id"),
                    "text": payload.get("text"),
                }
            )
        except ValidationError as e:
            raise InvalidInput(f"resume {entry.interrupt_id}: {e.errors()[0]['msg']}") from e
        view = await cards.answer(state, user.id, entry.interrupt_id, answer, channel)
        async with state.db.session() as s:
            card = await get_card(s, user.id, view.card_id)
        run.task_id = run.task_id or card.task_id
        if card.kind == CardKind.CLARIFY:  # the main thread routes the message again
            run.message_id = str(card.payload.get("message_id") or "") or None
    return Started(run, after, await _open_since(state, run.task_id))


async def _open_since(state: HandoffState, task_id: str | None) -> datetime:
    """A resumed run carries the calls still waiting (one that waited on the answered
    card finishes in it), and every call after them."""
    now = clock.now()
    if task_id is None:
        return now
    async with state.db.session() as s:
        oldest = await s.scalar(
            select(func.min(ToolCall.created_at)).where(
                ToolCall.task_id == task_id, ToolCall.status.not_in(FINAL_CALL)
            )
        )
    return min(clock.utc(oldest), now) if oldest is not None else now


async def stream(
    state: HandoffState, user_id: str, started: Started, poll: float
) -> AsyncIterator[str]:
    """SSE frames of the run: RUN_STARTED, then what the log tells, then its end."""
    encoder = EventEncoder()
    run, seq = started.run, started.after
    yield encoder.encode(RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id))
    while True:
        bell = BELL.waiter(user_id)
        try:
            events, seq = await _advance(state, user_id, started, seq)
            for event in events:
                yield encoder.encode(event)
            if run.finished:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(bell.wait(), poll)
        finally:
            BELL.forget(user_id, bell)


async def _advance(
    state: HandoffState, user_id: str, started: Started, seq: int
) -> tuple[list[BaseEvent], int]:
    run, out = started.run, list[BaseEvent]()
    async with state.db.session() as s:
        for e in await events_after(s, user_id, seq):
            seq = e.seq
            out += run.on_event(e.type, e.data)
            if run.finished:
                return out, seq
        if run.task_id is None:
            return out, seq
        out += run.on_tool_calls(await _calls(s, run.task_id, started.since), FINAL_CALL)
        view = await task_detail(s, user_id, run.task_id)
    out += run.on_state(
        {
            "task_id": view.task_id,
            "status": view.status,
            "status_reason": view.status_reason,
            "turn": view.turn,
            "checklist": [i.model_dump() for i in view.checklist],
            "cards": [c.model_dump() for c in view.cards if c.status == CardStatus.OPEN],
            "artifacts": view.artifacts,
        }
    )
    end = run.ending()
    if end is not None:
        out += [TextMessageEndEvent(message_id=m) for m in run.open_messages()]
        out.append(end)
    return out, seq


async def _calls(s: AsyncSession, task_id: str, since: datetime) -> list[ToolCallRow]:
    """The task's tool calls planned since the run began."""
    rows = await s.execute(
        select(
            ToolCall.call_id,
            ToolCall.tool_use_id,
            ToolCall.name,
            ToolCall.input,
            ToolCall.status,
            ToolCall.result,
        )
        .where(ToolCall.task_id == task_id, ToolCall.created_at >= since)
        .order_by(ToolCall.created_at, ToolCall.call_id)
    )
    return [ToolCallRow(*r) for r in rows]

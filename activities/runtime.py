"""The runtime's activities: model steps, the journaled tool dispatcher, task status."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.types import (
    CardRef,
    CardState,
    CheckpointInput,
    PlannedCall,
    StatusInput,
    StepDecision,
    StepInput,
    ToolInput,
    ToolOutcome,
    TurnState,
    TurnStateInput,
)
from context.build import ContextExtras, build_context, context_reads
from context.segments import ContextPolicy
from journal.rows import TASK_HEAD, TaskHead, state_reads
from journal.running import ShowLater, running_batch, write_running
from journal.statements import (
    CALL_RESULT,
    FINAL_CALL,
    LOCK_CALL,
    MARK_PROCESSED,
    PLAN_CALL,
    READ_CALL,
    START_CALL,
    STORE_STEP,
    STORED_STEP,
    TASK_TURN,
    end_status,
    message_texts,
    read_turn_state,
    retrieval_query,
    steps_upto,
    write_status,
)
from llm.types import ModelProvider, ModelResponse
from lomo import clock
from lomo.cards import create_card
from lomo.db.hot import execute_all, prefetched
from lomo.db.models import Card, ChecklistItem, Task
from lomo.events import append_event, event_batch
from lomo.heartbeat import heartbeating
from lomo.telemetry import MODEL_STEPS, TOOL_CALLS
from memory.context import (
    MemoryContext,
    exclusion_reads,
    exclusions,
    memory_for_context,
    profile_reads,
    read_profile,
    usage_writes,
)
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult, error
from tools.context import keep_outside, note_unloaded
from workspace.notices import notice_read, notices_for_context

log = logging.getLogger(__name__)


def now() -> datetime:
    return clock.now()


class RuntimeActivities:
    def __init__(self, deps: ToolDeps, provider: ModelProvider, tools: dict[str, Tool]) -> None:
        self.deps = deps
        self.db = deps.db
        self.provider = provider
        self.tools = tools
        self.policy = ContextPolicy.of(deps.settings)

    # --- model steps ----------------------------------------------------------------
    @staticmethod
    def _running(inp: StepInput) -> StatusInput | None:
        """The turn's status (`running`), guarded by the task's stored turn: a retried step
        that stored its decision does not write it again."""
        return None if inp.status is None else replace(inp.status, only_before_turn=inp.turn)

    @staticmethod
    async def _person(s: AsyncSession, task_id: str) -> str:
        """The task's person, for a step scheduled before `StepInput` carried it."""
        head = await TASK_HEAD.first(s, task_id=task_id)
        if head is None:
            raise ApplicationError(f"no task {task_id}", non_retryable=True)
        return str(head[1])

    async def _turn_status(self, s: AsyncSession, inp: StepInput) -> None:
        running = self._running(inp)
        if running is not None:
            await write_status(s, running)

    async def _end_of_step(self, s: AsyncSession, inp: StepInput, decision: StepDecision) -> None:
        """A step that ends the turn without a call reads the turn's state, and writes the
        status of a verdict that waits for the person, in the transaction that stores it."""
        if not decision.end_turn or decision.calls:
            return
        decision.turn_state = await read_turn_state(s, inp.task_id, inp.turn)
        if inp.end is not None:
            snap = replace(inp.end, asked_person=decision.asked_person)
            # The step's last write: it commits the step's transaction in its round trip.
            decision.status_written = await end_status(
                s, inp.task_id, inp.turn, snap, decision.turn_state, progress=False, commit=True
            )

    @activity.defn(name="model_step")
    async def model_step(self, inp: StepInput) -> StepDecision:
        async with self.db.session() as s:
            user_id = inp.user_id or await self._person(s, inp.task_id)
            # Every read of the step goes out in one round trip (lomo/db/hot.py): what decides
            # the path, memory's profile and everything the context is built from; on
            # Postgres outside a transaction (they write nothing: lomo/db/begin.py).
            running, at = self._running(inp), now()
            texts = message_texts(inp.message_ids) if inp.message_ids else None
            memory: asyncio.Future[MemoryContext] | None = None
            try:
                async with prefetched(
                    s,
                    STORED_STEP.bind(task_id=inp.task_id, turn=inp.turn, step=inp.step),
                    TASK_HEAD.bind(task_id=inp.task_id),
                    *([texts] if texts else []),
                    *profile_reads(user_id, inp.task_id),
                    *exclusion_reads(user_id),
                    notice_read(inp.task_id),
                    *context_reads(inp.task_id, user_id),
                ):
                    stored = await STORED_STEP.first(
                        s, task_id=inp.task_id, turn=inp.turn, step=inp.step
                    )
                    if stored:  # the decision is persisted: never ask the model twice
                        await self._turn_status(s, inp)
                        n = await steps_upto(s, inp.task_id, stored[0])
                        response = ModelResponse.from_dict(stored[1])
                        decision = _decision(response, self.policy.closing(n))
                        await self._end_of_step(s, inp, decision)
                        return decision
                    head = await TASK_HEAD.first(s, task_id=inp.task_id)
                    if head is None:
                        raise ApplicationError(f"no task {inp.task_id}", non_retryable=True)
                    # The context shows the turn it is built for; the row itself is written
                    # with the stored step below, so building the context writes nothing.
                    task = TaskHead(*head)
                    task.turn = inp.turn
                    if task.user_id != user_id:
                        raise ApplicationError(
                            f"task {inp.task_id} is not the person's {user_id}", non_retryable=True
                        )
                    said = [r[0] for r in await texts.rows(s)] if texts else []
                    # Only the search is left of memory (it degrades on its own, with a
                    # timeout inside, never raises): it runs while the context's own reads
                    # travel, and its memories join the context after them.
                    profile, unbound = await read_profile(s, user_id, inp.task_id)
                    memory = asyncio.ensure_future(
                        memory_for_context(
                            self.deps,
                            user_id,
                            inp.task_id,
                            retrieval_query(task.goal, said),
                            (profile, unbound),
                        )
                    )
                    excl = await exclusions(s, user_id)
                    extras = ContextExtras(
                        profile=profile.profile_text,
                        profile_version=profile.profile_version,
                        notices=await notices_for_context(s, inp.task_id),
                        excluded_messages=excl.message_ids,
                        excluded_steps={
                            (t, n) for tid, t, n in excl.step_keys if tid == inp.task_id
                        },
                    )

                    async def found(extras: ContextExtras) -> None:
                        assert memory is not None
                        got = await memory
                        extras.memories = got.items
                        extras.degraded = [f"memory: {got.degraded}"] if got.degraded else []

                    built = await build_context(
                        s,
                        task,
                        inp.turn,
                        inp.step,
                        inp.message_ids,
                        self.tools,
                        extras,
                        self.policy,
                        late=found,
                    )
                    mem = await memory
            finally:
                if memory is not None:
                    memory.cancel()  # only if this step failed before taking its result
        # `running` is written while the model thinks, or with its decision if it answers
        # first (activities/turn_status.py): the step's reads wrote nothing.
        later = (
            ShowLater(self.db, running, at, self.deps.settings.running_event_seconds)
            if running
            else None
        )
        try:
            async with heartbeating():
                resp = await self.provider.complete(built.request)
        except BaseException:
            if later is not None:
                later.cancel()
            raise
        show = running if later is not None and await later.settle() else None
        async with self.db.session() as s:
            # Plain INSERTs (no unit-of-work flush), sent together (lomo/db/hot.py): the
            # unique (task, turn, step) makes a concurrent attempt's insert fail this
            # transaction instead of adding a step.
            at_start, at = at, now()
            key = {"p_task": inp.task_id, "p_turn": inp.turn, "p_step": inp.step, "p_at": at}
            context = {
                "layers": built.layers,
                "tools": built.visible_tools,
                "reported_orders": built.reported_orders,
                "prefix": built.prefix,
            }
            # The steps before this one plus this one.
            decision = _decision(resp, self.policy.closing(built.steps_before + 1))
            # The turn's state, should this step end the turn, read in the same round trip.
            ends = decision.end_turn and not decision.calls
            reply = {"task_id": inp.task_id, "text": resp.text}
            lead = running_batch(s, show, at_start) if show else []
            if show and not lead:
                await write_running(s, show, at_start, lead)  # before the batch's events
            async with prefetched(
                s,
                *lead,
                STORE_STEP.bind(
                    **key,
                    p_context=context,
                    p_response=resp.to_dict(),
                    p_reported=built.reported_orders or None,
                ),
                MARK_PROCESSED.bind(**key, p_ids=inp.message_ids),
                # No read of the row: the person is known from the read above.
                TASK_TURN.bind(**key),
                *(
                    PLAN_CALL.bind(
                        p_id=f"{inp.task_id}:{inp.turn}:{inp.step}:{i}",
                        p_task=inp.task_id,
                        p_use=use.id,
                        p_name=use.name,
                        p_input=use.input,
                        p_at=at,
                    )
                    for i, use in enumerate(resp.tool_uses)
                ),
                *(event_batch(s, user_id, "task.reply", reply, at) if resp.text else []),
                # Which memory versions this output drew on: forgetting one excludes it.
                *usage_writes(inp.task_id, inp.turn, inp.step, mem.version_ids, at),
                *(state_reads(inp.task_id) if ends else []),
                # Committed in the same round trip when nothing is written after the batch
                # (the turn goes on, or ends with a call).
                commit=not ends,
            ):
                if show and lead:
                    await write_running(s, show, at_start, lead)
                if resp.text:  # answered from the batch where it was in it
                    await append_event(s, user_id, "task.reply", reply, at=at)
                await self._end_of_step(s, inp, decision)
        MODEL_STEPS.inc()
        return decision

    # --- tools ----------------------------------------------------------------------
    async def _after_call(
        self, s: AsyncSession, inp: ToolInput, outcome: ToolOutcome, commit: bool = False
    ) -> None:
        """The turn's last call reads the turn's state (and writes the status of a verdict
        that waits for the person) in the transaction that stores its result. `commit`: that
        status write is the session's last (it commits in the same round trip)."""
        if not inp.turn_state_for:
            return
        outcome.turn_state = await read_turn_state(s, inp.task_id, inp.turn_state_for)
        if inp.end is not None:
            outcome.status_written = await end_status(
                s,
                inp.task_id,
                inp.turn_state_for,
                inp.end,
                outcome.turn_state,
                progress=outcome.made_progress,
                new_order=outcome.order_id,
                new_card=outcome.card_id,
                commit=commit,
            )

    @activity.defn(name="run_tool")
    async def run_tool(self, inp: ToolInput) -> ToolOutcome:
        """Journal the call under its call_id, then dispatch; a replay returns the record."""
        async with self.db.session() as s:
            planned = self.tools.get(inp.name)
            if planned is not None and planned.idempotent:
                # Running it twice is harmless, so the `started` mark (which only tells a
                # retry that a call may have acted) is not written: this transaction writes
                # nothing, and its commit waits for no WAL flush (0.85 ms of the agent step
                # on this machine, issue 14).
                (found,) = await execute_all(s, READ_CALL.bind(call_id=inp.call_id))
            else:
                # The lock and the `started` mark in one round trip (the mark changes
                # nothing when the call has its result).
                found, _ = await execute_all(
                    s,
                    LOCK_CALL.bind(call_id=inp.call_id),
                    START_CALL.bind(p_id=inp.call_id, p_at=now()),
                )
            if not found:
                raise ApplicationError(f"no planned call {inp.call_id}", non_retryable=True)
            status, result, name, args, user_id = found[0]
            if inp.name and name != inp.name:
                raise ApplicationError(
                    f"call {inp.call_id} is a call of {name}, not {inp.name}", non_retryable=True
                )
            if result is not None and status in FINAL_CALL:
                done = _outcome(status, result)  # same answer, no second effect
                await self._after_call(s, inp, done)
                return done
            tool = self.tools.get(name)
            crashed_mid_call = status == "started"
            unseen = (
                await note_unloaded(s, inp.task_id, inp.call_id, tool, self.tools) if tool else None
            )
            args = dict(args)
        if tool is None:
            res = error(f"unknown tool {name}")
        elif crashed_mid_call and not tool.idempotent:
            # Our own call started without a result: it may or may not have acted. Never
            # act twice; the model must check the state first.
            res = ToolResult(
                "outcome_unknown",
                {
                    "status": "outcome_unknown",
                    "detail": f"{name} was interrupted; check the current state before "
                    "repeating it",
                },
            )
        else:
            _, turn, step, index = inp.call_id.rsplit(":", 3)
            ctx = ToolCallContext(
                inp.task_id, user_id, inp.call_id, int(turn), int(step), int(index)
            )
            async with heartbeating():
                res = await tool.run(ctx, args)
        try:
            outcome = await self._store_result(inp, res, tool, user_id, unseen)
        except _FirstWasStored:
            # A concurrent attempt stored the call's final result first (this transaction
            # was rolled back): the same answer as the journal's.
            async with self.db.session() as s:
                row = await LOCK_CALL.first(s, call_id=inp.call_id)
                assert row is not None and row[1] is not None
                first = _outcome(row[0], row[1])
                await self._after_call(s, inp, first)
                return first
        TOOL_CALLS.labels(name, res.status).inc()
        return outcome

    async def _store_result(
        self, inp: ToolInput, res: ToolResult, tool: Tool | None, user_id: str, unseen: str | None
    ) -> ToolOutcome:
        async with self.db.session() as s:
            record = dict(res.result)
            for key in ("order_id", "card_id"):
                if getattr(res, key):
                    record.setdefault(key, getattr(res, key))
            if res.artifacts:
                record.setdefault("artifacts", res.artifacts)
            if unseen:
                record.setdefault("visibility", unseen)
            record["_progress"] = res.made_progress
            if not (tool and tool.inline_output):
                record = await keep_outside(
                    s,
                    user_id,
                    inp.task_id,
                    inp.call_id,
                    record,
                    self.deps.settings.tool_output_inline_chars,
                )
            outcome = _outcome(res.status, record)
            # The result and, if this call ends the turn, the turn's state in one round trip.
            stored = CALL_RESULT.bind(
                p_id=inp.call_id, p_status=res.status, p_result=record, p_at=now()
            )
            async with prefetched(
                s, stored, *(state_reads(inp.task_id) if inp.turn_state_for else [])
            ):
                if not await stored.rows(s):  # answered from the batch
                    raise _FirstWasStored()
                await self._after_call(s, inp, outcome, commit=True)
        return outcome

    @activity.defn(name="set_task_status")
    async def set_task_status(self, inp: StatusInput) -> None:
        async with self.db.session() as s:
            await write_status(s, inp)

    @activity.defn(name="turn_state")
    async def turn_state(self, inp: TurnStateInput) -> TurnState:
        async with self.db.session() as s:
            return await read_turn_state(s, inp.task_id, inp.turn)

    @activity.defn(name="create_checkpoint_card")
    async def create_checkpoint_card(self, inp: CheckpointInput) -> CardRef:
        """The model reached a checkpoint without asking: the runtime asks itself."""
        async with self.db.session() as s:
            item = await s.get(ChecklistItem, inp.item_id)
            task = await s.get(Task, inp.task_id)
            if item is None or task is None or item.task_id != task.id:
                raise ApplicationError(f"no checkpoint {inp.item_id}", non_retryable=True)
            de = task.language == "de"
            card = await create_card(
                s,
                user_id=task.user_id,
                kind="confirm",
                title=("Bitte bestätigen: " if de else "Please confirm: ") + item.title,
                options=[
                    {"id": "confirm", "label": "Ja" if de else "Yes"},
                    {"id": "reject", "label": "Nein" if de else "No"},
                ],
                task_id=task.id,
                payload={"item_id": item.id, "by": "runtime"},
                key=f"checkpoint:{item.id}:{task.turn}",
            )
            return CardRef(card.id)

    @activity.defn(name="card_state")
    async def card_state(self, ref: CardRef) -> CardState:
        async with self.db.session() as s:
            card = await s.get(Card, ref.card_id)
            if card is None:
                raise ApplicationError(f"no card {ref.card_id}", non_retryable=True)
            return CardState(card.id, card.status, (card.answer or {}).get("action", ""))

    def all(self) -> list[Any]:
        return [
            self.model_step,
            self.run_tool,
            self.set_task_status,
            self.turn_state,
            self.create_checkpoint_card,
            self.card_state,
        ]


class _FirstWasStored(Exception):
    """Another attempt of the call stored its final result first: roll this one back."""


def _outcome(status: str, record: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome(
        status=status,
        order_id=record.get("order_id"),
        made_progress=bool(record.get("_progress")),
        card_id=record.get("card_id"),
        flow_run=record.get("_start_flow_run"),
    )


def _decision(resp: ModelResponse, segment_closed: int = -1) -> StepDecision:
    calls = [PlannedCall(i, u.name) for i, u in enumerate(resp.tool_uses)]
    end = resp.stop_reason != "tool_use" or not calls
    asked = end and not calls and resp.text.rstrip().endswith("?")
    return StepDecision(
        calls=calls, end_turn=end, asked_person=asked, segment_closed=segment_closed
    )

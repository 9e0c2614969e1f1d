"""The runtime's activities: the model step, the journaled tool dispatcher, task status.

Each reads and writes through the step's storage (`journal/store.py`) and returns facts;
the workflow decides what follows (`workflows/task.py`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, replace
from typing import Any

from sqlalchemy.exc import IntegrityError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.present import cancel_reply, result_reply
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
from cards.store import create_card
from context.build import BuiltContext, build_context
from context.pictures import wanted
from context.segments import ContextPolicy
from context.types import Recalled, StepData
from journal.drafts import DraftKey, ReplyDraft
from journal.marks import take_messages
from journal.running import ShowRunning
from journal.statements import FINAL_CALL
from journal.store import StepStore
from journal.types import (
    CallResult,
    PlannedCallRow,
    StatusChange,
    StepLoad,
    StepQuery,
    StepRecord,
    TurnFacts,
)
from llm.streaming import complete_streaming
from llm.types import ModelProvider, ModelResponse
from lomo import clock
from lomo.db.models import Card, ChecklistItem, Task
from lomo.heartbeat import heartbeating
from lomo.states import CardAction, CardKind
from lomo.telemetry import MODEL_STEPS, TOOL_CALLS
from lomo.words import say
from memory.context import MemoryContext, memory_for_context
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult, error
from tools.context import Kept, keep_outside, unloaded_note
from tools.generation import PRESENT_WHEN_DONE
from workspace.preview import Preview, PreviewBound, load_previews

log = logging.getLogger(__name__)


class RuntimeActivities:
    def __init__(self, deps: ToolDeps, provider: ModelProvider, tools: dict[str, Tool]) -> None:
        self.deps = deps
        self.db = deps.db
        self.provider = provider
        self.tools = tools
        self.policy = ContextPolicy.of(deps.settings)
        self.store = StepStore(deps.db, self.policy)

    # --- the model step ---------------------------------------------------------------------
    @activity.defn(name="model_step")
    async def model_step(self, inp: StepInput) -> StepDecision:
        """Load the step, ask the model, commit the decision; a step whose decision is
        stored answers from it and never asks the model twice."""
        at = clock.now()
        searching: list[asyncio.Future[MemoryContext]] = []
        # Taken before anything is read for the model: a message withdrawn or moved away
        # first is left out, and one taken can no longer be withdrawn (journal/marks.py).
        taken = await take_messages(self.db, inp.user_id, inp.task_id, inp.message_ids)
        inp = replace(inp, message_ids=taken)
        try:
            loaded = await self.store.load_step(
                StepQuery(inp.task_id, inp.user_id, inp.turn, inp.step, inp.message_ids),
                lambda data, unbound: searching.append(self._search(data, unbound)),
            )
            if loaded.stored is not None:
                return await self._stored(inp, loaded)
            recalled = await _recalled(searching[0]) if searching else Recalled()
        except (LookupError, PermissionError) as e:
            kind = "NotFound" if isinstance(e, LookupError) else "NotAllowed"
            raise ApplicationError(str(e), type=kind, non_retryable=True) from e
        finally:
            for f in searching:
                f.cancel()  # a no-op once it finished; a failed step drops its search
        loaded.data.previews = await self._previews(loaded.data)
        built = build_context(loaded.data, self.tools, self.policy, recalled)
        running = _running(inp)
        show = ShowRunning(self.store, running, at, self.deps.settings.running_event_seconds)
        draft = ReplyDraft(self.db, _draft_key(inp), self.deps.settings.stream_flush_seconds)
        try:
            async with heartbeating():
                resp = await complete_streaming(self.provider, built.request, draft.add)
        except BaseException:
            show.cancel()
            raise
        decision = _decision(resp, self.policy.closing(built.steps_before + 1))
        record = _record(inp, built, resp, recalled)
        record.running, record.running_at = (running, at) if await show.settle() else (None, None)
        record.turn_facts = decision.end_turn and not decision.calls
        facts = await self._commit(record)
        decision.turn_state = _turn_state(facts) if facts else None
        MODEL_STEPS.inc()
        return decision

    def _search(self, data: StepData, unbound: bool) -> asyncio.Future[MemoryContext]:
        """Memory's search for this step, started while the rest of the step loads (it
        degrades on its own, with a timeout inside, and never raises)."""
        p = data.profile
        profile = MemoryContext(p.version, p.text, version_ids=list(p.version_ids))
        query = "\n".join([data.task.goal, *data.said])[:2000]
        return asyncio.ensure_future(
            memory_for_context(
                self.deps, data.task.user_id, data.task.id, query, (profile, unbound)
            )
        )

    async def _previews(self, data: StepData) -> dict[str, Preview]:
        """The pictures (and described media) this step shows, within the context's bound;
        their bytes stay in this activity, never in the workflow's history."""
        ids = wanted(data)
        if not ids:
            return {}
        s = self.deps.settings
        bound = PreviewBound(
            s.context_max_images, s.context_max_image_bytes, s.context_image_max_side
        )
        async with self.db.session() as session:
            return await load_previews(session, self.deps.assets, data.task.user_id, ids, bound)

    async def _stored(self, inp: StepInput, loaded: StepLoad) -> StepDecision:
        """The decision an earlier attempt stored, with the turn's facts if it ended it."""
        assert loaded.stored is not None
        response, n = loaded.stored
        decision = _decision(ModelResponse.from_dict(response), self.policy.closing(n))
        running = _running(inp)
        if running is not None:
            await self.store.write_status(running, clock.now())
        if decision.end_turn and not decision.calls:
            facts = await self.store.turn_facts(inp.task_id, inp.turn)
            decision.turn_state = _turn_state(facts)
        return decision

    async def _commit(self, record: StepRecord) -> TurnFacts | None:
        try:
            return await self.store.commit_step(record)
        except IntegrityError as e:
            # A concurrent attempt stored this step first: the retry answers from it.
            raise ApplicationError(
                f"step {record.turn}.{record.step} stored twice", type="StepStoredTwice"
            ) from e

    # --- the tool dispatcher ------------------------------------------------------------------
    @activity.defn(name="run_tool")
    async def run_tool(self, inp: ToolInput) -> ToolOutcome:
        """Journal the call under its call_id, then dispatch; a replay returns the record."""
        planned = self.tools.get(inp.name)
        # An idempotent tool may run twice: neither locked nor marked `started` first.
        mark = planned is None or not planned.idempotent
        found = await self.store.open_call(inp.call_id, mark, clock.now())
        if found is None:
            raise ApplicationError(
                f"no planned call {inp.call_id}", type="NotFound", non_retryable=True
            )
        if inp.name and found.name != inp.name:
            raise ApplicationError(
                f"call {inp.call_id} is a call of {found.name}, not {inp.name}",
                type="WrongTool",
                non_retryable=True,
            )
        if found.result is not None and found.status in FINAL_CALL:
            outcome = await self._replayed(inp, found.status, found.result)
        else:
            tool = self.tools.get(found.name)
            args = found.input
            res = await self._dispatch(inp, tool, found.name, found.status, found.user_id, args)
            unseen = unloaded_note(tool, found.seen_domains) if tool else None
            outcome = await self._store_result(inp, res, tool, found.user_id, unseen)
            TOOL_CALLS.labels(found.name, res.status).inc()
        # The plan's word, from the journaled call: its result is the answer.
        wants = found.input.get(PRESENT_WHEN_DONE) is True
        outcome.present = wants and outcome.status == "done" and outcome.order_id is not None
        return outcome

    async def _dispatch(
        self,
        inp: ToolInput,
        tool: Tool | None,
        name: str,
        status: str,
        user_id: str,
        args: dict[str, Any],
    ) -> ToolResult:
        if tool is None:
            return error(f"unknown tool {name}")
        if status == "started" and not tool.idempotent:
            # Our own call started without a result: it may or may not have acted. Never
            # act twice; the model must check the state first.
            detail = f"{name} was interrupted; check the current state before repeating it"
            return ToolResult("outcome_unknown", {"status": "outcome_unknown", "detail": detail})
        _, turn, step, index = inp.call_id.rsplit(":", 3)
        ctx = ToolCallContext(inp.task_id, user_id, inp.call_id, int(turn), int(step), int(index))
        async with heartbeating():
            return await tool.run(ctx, dict(args))

    async def _store_result(
        self, inp: ToolInput, res: ToolResult, tool: Tool | None, user_id: str, unseen: str | None
    ) -> ToolOutcome:
        record = _call_record(res, unseen)
        limit = self.deps.settings.tool_output_inline_chars
        inline = tool is not None and tool.inline_output
        kept = Kept(record) if inline else keep_outside(inp.call_id, record, limit)
        result = CallResult(
            inp.task_id,
            user_id,
            inp.call_id,
            res.status,
            kept.record,
            clock.now(),
            kept.text,
            kept.handle,
            inp.turn_state_for,
        )
        stored, facts = await self.store.finish_call(result)
        if not stored:
            # A concurrent attempt stored the call's final result first (this one was
            # retried over, or ran late): its answer is the journal's, this one's is dropped.
            log.info(
                "call %s: an earlier-stored result stands; this attempt's is dropped", inp.call_id
            )
            first = await self.store.open_call(inp.call_id, False, clock.now())
            assert first is not None and first.result is not None
            return await self._replayed(inp, first.status, first.result)
        outcome = _outcome(res.status, kept.record)
        outcome.turn_state = _turn_state(facts) if facts else None
        return outcome

    async def _replayed(self, inp: ToolInput, status: str, result: dict[str, Any]) -> ToolOutcome:
        """The same answer as the journal's, no second effect."""
        done = _outcome(status, result)
        if inp.turn_state_for:
            facts = await self.store.turn_facts(inp.task_id, inp.turn_state_for)
            done.turn_state = _turn_state(facts)
        return done

    # --- status and the turn's state ----------------------------------------------------------
    @activity.defn(name="set_task_status")
    async def set_task_status(self, inp: StatusInput) -> None:
        reply = await self._reply(inp) if inp.present else None
        if inp.cancelled:
            reply = await cancel_reply(self.db, inp.task_id, inp.cancelled, inp.cancel_cause)
        try:
            changed = await self.store.write_status(_change(inp, reply=reply), clock.now())
        except LookupError as e:
            raise ApplicationError(str(e), type="NotFound", non_retryable=True) from e
        if not changed and inp.fence and await self.store.fenced_out(inp.task_id, inp.fence):
            # A worker resumed a workflow task that another worker redid since.
            log.warning("task %s: stale status %r refused (fenced)", inp.task_id, inp.status)

    async def _reply(self, inp: StatusInput) -> dict[str, Any] | None:
        try:
            return await result_reply(self.db, inp.task_id, inp.present)
        except LookupError as e:
            # The workflow presents only collected results: the status still goes in.
            log.warning("%s", e)
            return None

    @activity.defn(name="turn_state")
    async def turn_state(self, inp: TurnStateInput) -> TurnState:
        return _turn_state(await self.store.turn_facts(inp.task_id, inp.turn))

    @activity.defn(name="create_checkpoint_card")
    async def create_checkpoint_card(self, inp: CheckpointInput) -> CardRef:
        """The model reached a checkpoint without asking: the runtime asks itself."""
        async with self.db.session() as s:
            item = await s.get(ChecklistItem, inp.item_id)
            task = await s.get(Task, inp.task_id)
            if item is None or task is None or item.task_id != task.id:
                raise ApplicationError(
                    f"no checkpoint {inp.item_id}", type="NotFound", non_retryable=True
                )
            lang = task.language
            card = await create_card(
                s,
                user_id=task.user_id,
                kind=CardKind.CONFIRM,
                title=say("runtime.checkpoint", lang, item=item.title),
                options=[
                    {"id": CardAction.CONFIRM, "label": say("answer.yes", lang)},
                    {"id": CardAction.REJECT, "label": say("answer.no", lang)},
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
                raise ApplicationError(
                    f"no card {ref.card_id}", type="NotFound", non_retryable=True
                )
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


async def _recalled(search: asyncio.Future[MemoryContext]) -> Recalled:
    got = await search
    degraded = [f"memory: {got.degraded}"] if got.degraded else []
    return Recalled(got.items, degraded, got.version_ids)


def _running(inp: StepInput) -> StatusChange | None:
    """The turn's status (`running`), guarded by the task's stored turn: a retried step
    that stored its decision does not write it again."""
    if inp.status is None:
        return None
    return _change(inp.status, only_before_turn=inp.turn)


def _change(inp: StatusInput, **over: Any) -> StatusChange:
    """The storage's change for a status the workflow decided (`present` becomes `reply`)."""
    fields = {
        k: v for k, v in asdict(inp).items() if k not in ("present", "cancelled", "cancel_cause")
    }
    return StatusChange(**{**fields, **over})


def _draft_key(inp: StepInput) -> DraftKey:
    attempt = activity.info().attempt  # a retry's partial text replaces the last one's
    return DraftKey(inp.user_id, inp.task_id, inp.turn, inp.step, attempt)


def _record(
    inp: StepInput, built: BuiltContext, resp: ModelResponse, recalled: Recalled
) -> StepRecord:
    return StepRecord(
        task_id=inp.task_id,
        user_id=inp.user_id,
        turn=inp.turn,
        step=inp.step,
        at=clock.now(),
        context={
            "layers": built.layers,
            "tools": built.visible_tools,
            "reported_orders": built.reported_orders,
            "prefix": built.prefix,
        },
        response=resp.to_dict(),
        reported_orders=built.reported_orders,
        message_ids=inp.message_ids,
        calls=[
            PlannedCallRow(f"{inp.task_id}:{inp.turn}:{inp.step}:{i}", u.id, u.name, u.input)
            for i, u in enumerate(resp.tool_uses)
        ],
        reply=resp.text,
        memory_versions=recalled.version_ids,
    )


def _call_record(res: ToolResult, unseen: str | None) -> dict[str, Any]:
    """What the journal keeps of a result: the tool's record with its order, card and
    artifacts, why an unloaded tool ran, and whether it made progress."""
    record = dict(res.result)
    for key in ("order_id", "card_id"):
        if getattr(res, key):
            record.setdefault(key, getattr(res, key))
    if res.artifacts:
        record.setdefault("artifacts", res.artifacts)
    if unseen:
        record.setdefault("visibility", unseen)
    record["_progress"] = res.made_progress
    return record


def _turn_state(facts: TurnFacts) -> TurnState:
    return TurnState(**asdict(facts))


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

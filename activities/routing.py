"""Semantic routing for the main thread: which task a message
belongs to. Explicit targets were settled by the api (no model); everything else comes
here: refresh the task index lazily, gather bounded candidates, ask the router, check for
duplicates before creating a persistent task, check the target before delivering.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.routing_move import move_previous
from cards.clarify import NEW_OPTION
from cards.store import create_card
from llm.types import ModelProvider, ModelRequest
from lomo import clock as platform_clock
from lomo.db.engine import Database
from lomo.db.models import Card, MessageRow, Task, TaskObject
from lomo.events import append_event
from lomo.ids import new_id
from lomo.settings import Settings
from lomo.telemetry import MESSAGES_ROUTED
from lomo.words import say
from memory.context import exclusions
from money.catalogue import catalogue_text
from money.policy import set_autonomy
from routing.conversation import recent_conversation
from routing.deterministic import RESTARTABLE
from routing.duplicates import likely_duplicates
from routing.index import Candidate, TaskIndex
from routing.models import RoutingRecord
from routing.prompt import clip, duplicate_request, route_call, route_request
from routing.text import detect_language
from routing.types import DECISIONS, MOVE, RoutePlan, RouteRequest
from vectors.base import VectorIndex
from vectors.embeddings import Embedder, get_embedder

log = logging.getLogger(__name__)

# A lightweight task that gets this many follow-ups is promoted to persistent ("the
# person keeps revising"); the model may promote earlier.
PROMOTE_AFTER_FOLLOWUPS = 2
CLOSED = ("archived", "stopped")


class RoutingActivities:
    def __init__(
        self,
        db: Database,
        provider: ModelProvider,
        settings: Settings,
        embedder: Embedder | None = None,
        vectors: VectorIndex | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.db = db
        self.provider = provider
        self.settings = settings
        if vectors is None:
            from vectors import open_vector_index

            vectors = open_vector_index(settings)
        self.index = TaskIndex(embedder or get_embedder(settings), vectors)
        self.clock = clock or platform_clock.now

    @activity.defn(name="route_message")
    async def route_message(self, inp: RouteRequest) -> RoutePlan:
        if inp.message_id.startswith("crd_"):
            return await self._clarified(inp.user_id, inp.message_id)
        async with self.db.session() as s:
            done = await self._recorded(s, inp.message_id)
            if done is not None:
                return done
            msg = await self._message(s, inp.user_id, inp.message_id)
            if msg.withdrawn_at is not None or msg.moved_to is not None:
                return self._taken_back(msg)
            if msg.deterministic and msg.task_id:
                # The api settled the target (a finished task to start again): no model.
                if msg.processed_turn is not None:
                    # Its task read it already, then ended; the api's direct hand-off came
                    # again (a relay round or a client retry that saw it as not yet read)
                    # and found no running workflow. Starting the task again would read it
                    # a second time: a repeat, not handed over.
                    plan = self._plan("existing", msg.id, msg.task_id)
                    plan.repeat = True
                    return plan
                task = await s.get(Task, msg.task_id)
                if task is None or task.status in CLOSED:
                    raise ApplicationError(f"task {msg.task_id} is closed", non_retryable=True)
                plan = await self._existing(s, msg, task, model_promote=False)
                return await self._record(s, msg, plan, [], 0)
            # Forgotten messages stay out of what the router reads, as out of any context.
            hidden = await exclusions(s, inp.user_id)
            await self.index.refresh(s, inp.user_id, hidden.message_ids)
            text, pinned = msg.text, await self._object_tasks(s, msg)
            talk = await recent_conversation(
                s,
                inp.user_id,
                msg.id,
                self.settings.routing_conversation_turns,
                hidden.message_ids,
                hidden.step_keys,
            )
        vector = (await self.index.embed([text]))[0]
        async with self.db.session() as s:
            cands = await self.index.candidates(
                s,
                inp.user_id,
                text,
                vector,
                self.settings.routing_active_window,
                self.settings.routing_search_limit,
                pinned,
            )
        now = self.clock()
        call = await self._ask(
            route_request(
                text, cands, now, catalogue_text(), talk.lines(now), detect_language(text)
            )
        )
        calls = 1
        if call["decision"] == "new":
            async with self.db.session() as s:
                suspects = await likely_duplicates(
                    self.index, s, inp.user_id, text, vector, self.settings.routing_duplicate_window
                )
            if suspects:
                second = await self._ask(duplicate_request(text, suspects, now, catalogue_text()))
                calls += 1
                if second["decision"] != "new":
                    call = {**call, **second}
                    shown = {c.task_id for c in cands}
                    cands = cands + [c for c, *_ in suspects if c.task_id not in shown]
        async with self.db.session() as s:
            done = await self._recorded(s, inp.message_id)
            if done is not None:
                return done
            msg = await self._message(s, inp.user_id, inp.message_id)
            if msg.withdrawn_at is not None or msg.moved_to is not None:
                return self._taken_back(msg)
            plan = await self._apply(s, msg, call, {c.task_id: c for c in cands})
            return await self._record(s, msg, plan, [c.task_id for c in cands], calls)

    @activity.defn(name="route_failed")
    async def route_failed(self, inp: RouteRequest) -> None:
        """Routing gave up on an item (e.g. unusable router output): say so to the person
        instead of dropping the message silently. Idempotent per item."""
        async with self.db.session() as s:
            if await s.get(RoutingRecord, inp.message_id) is not None:
                return
            card = await s.get(Card, inp.message_id) if inp.message_id.startswith("crd_") else None
            msg_id = str(card.payload.get("message_id")) if card else inp.message_id
            msg = await s.get(MessageRow, msg_id)
            if msg is None or msg.user_id != inp.user_id:
                return  # nothing of this person's to answer
            text = say("route.lost", detect_language(msg.text))
            await append_event(s, inp.user_id, "task.reply", {"message_id": msg.id, "text": text})
            plan = self._plan("answer", msg.id)
            await self._record(s, msg, plan, [], 0, key=inp.message_id)

    # --- the model ---------------------------------------------------------------------
    async def _ask(self, req: ModelRequest) -> dict[str, Any]:
        resp = await self.provider.complete(req)
        call = route_call(resp.tool_uses)
        if call is None or call.get("decision") not in (*DECISIONS, MOVE):
            raise ApplicationError(
                f"router answered without a valid route: {call}", non_retryable=True
            )
        return call

    # --- decisions ---------------------------------------------------------------------
    async def _apply(
        self, s: AsyncSession, msg: MessageRow, call: dict[str, Any], cands: dict[str, Candidate]
    ) -> RoutePlan:
        decision = str(call["decision"])
        if decision == MOVE:
            return await self._move(s, msg, str(call.get("task_id") or ""), list(cands))
        if decision == "existing":
            task = await s.get(Task, str(call.get("task_id") or ""))
            if task is None or task.user_id != msg.user_id:
                # A task id the router made up: ask rather than guess.
                return await self._clarify(s, msg, list(cands)[:4], "unknown task")
            if task.status in CLOSED:
                return await self._clarify(s, msg, [task.id], task.status)
            return await self._existing(s, msg, task, bool(call.get("promote")))
        if decision == "clarify":
            ids = [str(i) for i in call.get("candidate_ids") or [] if str(i) in cands]
            return await self._clarify(s, msg, ids or list(cands)[:4], "ambiguous")
        if decision in ("lightweight", "new"):
            briefing = str(call.get("briefing") or "")
            return await self._create(s, msg, decision, briefing)
        text = str(call.get("answer") or "")
        await append_event(s, msg.user_id, "task.reply", {"message_id": msg.id, "text": text})
        return self._plan("answer", msg.id)

    async def _create(
        self, s: AsyncSession, msg: MessageRow, decision: str, briefing: str
    ) -> RoutePlan:
        kind = "persistent" if decision == "new" else "lightweight"
        now = self.clock()
        task = Task(
            id=new_id("tsk"),
            user_id=msg.user_id,
            kind=kind,
            status="running",
            goal=msg.text[:500],
            summary=briefing[:1000],
            # The person's own words decide the language, never the router's briefing.
            language=detect_language(msg.text),
            created_at=now,
            updated_at=now,
        )
        s.add(task)
        await s.flush()
        if msg.channel == "api":
            # Paid calls arriving through the open API are confirmed one by one (§8.4).
            await set_autonomy(s, msg.user_id, task.id, "ask")
        await append_event(s, msg.user_id, "task.created", {"task_id": task.id, "kind": kind})
        return self._plan(decision, msg.id, task.id, kind)

    async def _existing(
        self, s: AsyncSession, msg: MessageRow, task: Task, model_promote: bool
    ) -> RoutePlan:
        followups = await s.scalar(
            select(func.count())
            .select_from(MessageRow)
            .where(MessageRow.task_id == task.id, MessageRow.id != msg.id)
        )
        promote = task.kind == "lightweight" and (
            model_promote or int(followups or 0) >= PROMOTE_AFTER_FOLLOWUPS
        )
        restart = task.status in (*RESTARTABLE, *CLOSED)
        if promote:
            task.kind = "persistent"  # now in the task list; the workflow hears `promote`
            await append_event(s, msg.user_id, "task.promoted", {"task_id": task.id})
        if restart:
            task.status = "running"
        task.updated_at = self.clock()  # the task is the most recently active one again
        plan = self._plan("existing", msg.id, task.id, task.kind)
        plan.restart, plan.turn, plan.promote = restart, task.turn, promote
        return plan

    async def _move(
        self, s: AsyncSession, msg: MessageRow, task_id: str, cands: list[str]
    ) -> RoutePlan:
        """ "That was meant for the posters": the person's previous message goes to that
        task as a new message there (delivered by the main thread, like a follow-up); the
        task it left is told. `msg` itself is answered, not handed to any task."""
        task = await s.get(Task, task_id)
        if task is None or task.user_id != msg.user_id or task.status in CLOSED:
            return await self._clarify(s, msg, cands[:4], "unknown task")
        moved = await move_previous(s, msg, task)
        de = detect_language(msg.text) == "de"
        if moved is None:
            text = "Da ist nichts zu verschieben." if de else "There is nothing to move."
            await append_event(s, msg.user_id, "task.reply", {"message_id": msg.id, "text": text})
            return self._plan("answer", msg.id)
        plan = await self._existing(s, moved.copy, task, model_promote=False)
        plan.decision, plan.message_id = MOVE, moved.copy.id
        plan.left_task, plan.left_message, plan.left_notice = moved.left()
        goal = clip(task.goal, 80) or task.id
        text = f"Verschoben nach „{goal}“." if de else f'Moved to "{goal}".'
        await append_event(s, msg.user_id, "task.reply", {"message_id": msg.id, "text": text})
        return plan

    async def _clarify(
        self, s: AsyncSession, msg: MessageRow, task_ids: list[str], reason: str
    ) -> RoutePlan:
        tasks = [t for t in [await s.get(Task, i) for i in task_ids] if t is not None]
        de = detect_language(msg.text) == "de"
        options = [{"id": t.id, "label": clip(t.goal, 80) or t.id} for t in tasks]
        if reason in CLOSED:
            title = (
                f"Diese Aufgabe ist {'archiviert' if reason == 'archived' else 'gestoppt'}. "
                "Wieder aufnehmen?"
                if de
                else f"That task is {reason}. Reopen it?"
            )
        else:
            title = "Welche Aufgabe meinst du?" if de else "Which task do you mean?"
        options.append({"id": NEW_OPTION, "label": "Etwas Neues" if de else "Something new"})
        card = await create_card(
            s,
            user_id=msg.user_id,
            kind="clarify",
            title=title,
            options=options,
            payload={"message_id": msg.id, "reason": reason, "text": clip(msg.text, 200)},
            key=f"clarify:{msg.id}",
        )
        plan = self._plan("clarify", msg.id)
        plan.task_id = None
        log.info("asked %s about %s (%s)", card.id, msg.id, reason)
        return plan

    async def _clarified(self, user_id: str, card_id: str) -> RoutePlan:
        """The person answered a clarify card: route its message as they chose."""
        async with self.db.session() as s:
            done = await self._recorded(s, card_id)
            if done is not None:
                return done
            card = await s.get(Card, card_id)
            if card is None or card.user_id != user_id or card.kind != "clarify":
                raise ApplicationError(f"no clarify card {card_id}", non_retryable=True)
            answer = card.answer or {}
            msg = await self._message(s, user_id, str(card.payload.get("message_id")))
            choice = answer.get("option_id") if answer.get("action") == "select" else None
            task = await s.get(Task, str(choice)) if choice and choice != NEW_OPTION else None
            if task is not None and task.user_id == user_id:
                plan = await self._existing(s, msg, task, model_promote=False)
            elif choice == NEW_OPTION:
                plan = await self._create(s, msg, "new", "")
            else:
                text = "Okay." if detect_language(msg.text) != "de" else "Alles klar."
                await append_event(s, user_id, "task.reply", {"message_id": msg.id, "text": text})
                plan = self._plan("answer", msg.id)
            return await self._record(s, msg, plan, [], 0, key=card_id)

    # --- bookkeeping -------------------------------------------------------------------
    def _plan(
        self, decision: str, message_id: str, task_id: str | None = None, kind: str | None = None
    ) -> RoutePlan:
        return RoutePlan(
            decision,
            task_id,
            kind,
            max_steps_per_turn=self.settings.max_steps_per_turn,
            generation_wait_seconds=self.settings.generation_wait_seconds,
            max_turns_without_progress=self.settings.max_turns_without_progress,
            card_wait_seconds=self.settings.card_wait_seconds,
            heartbeat_timeout_seconds=self.settings.heartbeat_timeout_seconds,
            running_visible_seconds=self.settings.running_visible_seconds,
            message_id=message_id,
        )

    def _taken_back(self, msg: MessageRow) -> RoutePlan:
        """The person withdrew the message, or moved it elsewhere, before it was routed:
        nothing is handed over (a plan flagged as a repeat)."""
        plan = self._plan("answer", msg.id)
        plan.repeat = True
        return plan

    async def _recorded(self, s: AsyncSession, key: str) -> RoutePlan | None:
        """The plan stored for this item. Returned as is to a retry of the activity that
        stored it (its workflow has not handed it over yet); to any other activity, flagged
        as a repeat: the item was handed to the main thread twice (an api retry)."""
        rec = await s.get(RoutingRecord, key)
        if rec is None:
            return None
        fields = dict(rec.plan)
        by = fields.pop(_BY, None)
        plan = RoutePlan(**fields)
        plan.repeat = by is not None and by != _origin()
        return plan

    async def _message(self, s: AsyncSession, user_id: str, message_id: str) -> MessageRow:
        msg = await s.get(MessageRow, message_id)
        if msg is None or msg.user_id != user_id:
            raise ApplicationError(f"no message {message_id}", non_retryable=True)
        return msg

    async def _object_tasks(self, s: AsyncSession, msg: MessageRow) -> list[str]:
        object_id = (msg.target or {}).get("object_id")
        if not object_id:
            return []
        rows = await s.scalars(select(TaskObject.task_id).where(TaskObject.object_id == object_id))
        return list(rows)

    async def _record(
        self,
        s: AsyncSession,
        msg: MessageRow,
        plan: RoutePlan,
        shown: list[str],
        calls: int,
        key: str | None = None,
    ) -> RoutePlan:
        """Store the plan with the message's routing in one transaction (a retry reads it)."""
        msg.routing_status, msg.decision = "routed", plan.decision
        # A move hands over the moved message's copy: these words belong to no task.
        msg.task_id = plan.task_id if plan.decision not in ("clarify", MOVE) else None
        s.add(
            RoutingRecord(
                key=key or msg.id,
                user_id=msg.user_id,
                message_id=msg.id,
                plan={**_plan_dict(plan), _BY: _origin()},
                candidates=shown,
                model_calls=calls,
            )
        )
        await append_event(
            s,
            msg.user_id,
            "message.routed",
            {"message_id": msg.id, "decision": plan.decision, "task_id": plan.task_id},
        )
        MESSAGES_ROUTED.labels(plan.decision).inc()
        return plan

    def all(self) -> list[Any]:
        return [self.route_message, self.route_failed]


_BY = "_routed_by"


def _origin() -> str:
    """Which activity routes: one activity's attempts share it, a second one does not."""
    if not activity.in_activity():
        return ""
    info = activity.info()
    return f"{info.workflow_id}/{info.workflow_run_id}/{info.activity_id}"


def _plan_dict(plan: RoutePlan) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(plan)

"""Semantic routing for the main thread (ARCHITECTURE §2): which task a message belongs to."""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from lomo.catalogue import catalogue_text
from lomo.db.engine import Database
from lomo.db.models import MessageRow, Task
from lomo.events import append_event
from lomo.ids import new_id
from lomo.llm.offline import detect_language
from lomo.llm.types import Message, ModelProvider, ModelRequest, SystemBlock, TextBlock
from lomo.settings import Settings
from workflows.types import RouteDecision, RouteInput

ROUTER_RULES = (
    "Route the person's message: call the tool `route` with decision answer (you answer "
    "yourself: simple or capability questions, from the catalogue below), lightweight (one "
    "generation), new (a persistent task). Generation model catalogue:\n"
)


class RoutingActivities:
    def __init__(self, db: Database, provider: ModelProvider, settings: Settings) -> None:
        self.db = db
        self.provider = provider
        self.settings = settings

    @activity.defn(name="route_message")
    async def route_message(self, inp: RouteInput) -> RouteDecision:
        async with self.db.session() as s:
            msg = await s.get(MessageRow, inp.message_id)
            if msg is None or msg.user_id != inp.user_id:
                raise ApplicationError(f"no message {inp.message_id}", non_retryable=True)
            if msg.routing_status == "routed":  # a retry after the decision was stored
                kind = None
                if msg.task_id:
                    task = await s.get(Task, msg.task_id)
                    kind = task.kind if task else None
                return self._decision(msg.decision or "answer", msg.task_id, kind)
        req = ModelRequest(
            system=[SystemBlock(text=ROUTER_RULES + catalogue_text(), cache=True)],
            messages=[Message(role="user", content=[TextBlock(text=msg.text)])],
            purpose="route",
        )
        resp = await self.provider.complete(req)
        uses = [u for u in resp.tool_uses if u.name == "route"]
        decision = str(uses[0].input.get("decision", "answer")) if uses else "answer"
        if decision not in ("answer", "lightweight", "new", "existing", "clarify"):
            raise ApplicationError(f"router returned {decision!r}", non_retryable=True)
        task_id: str | None = None
        kind = "persistent" if decision == "new" else "lightweight"
        async with self.db.session() as s:
            msg = await s.get(MessageRow, inp.message_id)
            assert msg is not None
            if decision in ("lightweight", "new"):
                task_id = new_id("tsk")
                s.add(
                    Task(
                        id=task_id,
                        user_id=inp.user_id,
                        kind=kind,
                        status="running",
                        goal=msg.text[:500],
                        # The person's own words decide the language (article §11.3).
                        language=detect_language(msg.text),
                    )
                )
                await s.flush()
                await append_event(
                    s, inp.user_id, "task.created", {"task_id": task_id, "kind": kind}
                )
            elif decision == "answer":
                answer = str(uses[0].input.get("answer") or "") if uses else ""
                await append_event(
                    s,
                    inp.user_id,
                    "task.reply",
                    {"message_id": msg.id, "text": answer or resp.text},
                )
            msg.routing_status, msg.decision, msg.task_id = "routed", decision, task_id
            await append_event(
                s,
                inp.user_id,
                "message.routed",
                {"message_id": msg.id, "decision": decision, "task_id": task_id},
            )
        return self._decision(decision, task_id, kind)

    def _decision(self, decision: str, task_id: str | None, kind: str | None) -> RouteDecision:
        return RouteDecision(
            decision,
            task_id,
            kind,
            max_steps_per_turn=self.settings.max_steps_per_turn,
            generation_wait_seconds=self.settings.generation_wait_seconds,
        )

    def all(self) -> list[Any]:
        return [self.route_message]

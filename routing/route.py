"""Routing a message in the main thread: which task it belongs to. Explicit targets were
settled by the api (no model); everything else comes here: refresh the task index lazily,
gather bounded candidates, ask the router, check for duplicates before creating a
persistent task, then carry out the decision (`routing/decide.py`).

The model is called between transactions, never inside one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from llm.types import ModelProvider, ModelRequest
from lomo.db.engine import Database
from lomo.db.models import MessageRow, TaskObject
from memory.context import exclusions
from money.catalogue import catalogue_text
from routing import decide
from routing.conversation import Conversation, recent_conversation
from routing.duplicates import likely_duplicates
from routing.errors import Unroutable
from routing.index import Candidate, TaskIndex
from routing.plans import RouteContext, message, record, recorded, taken_back
from routing.prompt import duplicate_request, route_call, route_request
from routing.text import detect_language
from routing.types import DECISIONS, MOVE, RoutePlan


@dataclass
class Router:
    db: Database
    provider: ModelProvider
    index: TaskIndex

    async def route(self, ctx: RouteContext, user_id: str, item_id: str) -> RoutePlan:
        """Route a message, or the message of an answered clarify card (`crd_…`)."""
        if item_id.startswith("crd_"):
            async with self.db.session() as s:
                return await decide.clarified(s, ctx, user_id, item_id)
        async with self.db.session() as s:
            done = await recorded(s, ctx, item_id)
            if done is not None:
                return done
            msg = await message(s, user_id, item_id)
            if taken_back(msg):
                return ctx.taken_back(msg)
            if msg.deterministic and msg.task_id:
                return await decide.deterministic(s, ctx, msg)
            text, pinned, talk = await self._gather(s, ctx, msg)
        vector = (await self.index.embed([text]))[0]
        async with self.db.session() as s:
            st = ctx.settings
            cands = await self.index.candidates(
                s,
                user_id,
                text,
                vector,
                st.routing_active_window,
                st.routing_search_limit,
                pinned,
            )
        call, cands, calls = await self._decide(ctx, user_id, text, vector, cands, talk)
        async with self.db.session() as s:
            done = await recorded(s, ctx, item_id)
            if done is not None:
                return done
            msg = await message(s, user_id, item_id)
            if taken_back(msg):
                return ctx.taken_back(msg)
            shown = [c.task_id for c in cands]
            plan = await decide.apply(s, ctx, msg, call, shown)
            return await record(s, ctx, msg, plan, shown, calls)

    async def failed(self, ctx: RouteContext, user_id: str, item_id: str) -> None:
        async with self.db.session() as s:
            await decide.failed(s, ctx, user_id, item_id)

    async def _gather(
        self, s: AsyncSession, ctx: RouteContext, msg: MessageRow
    ) -> tuple[str, list[str], Conversation]:
        """The message's text, the tasks its object pins, and the recent conversation,
        with the task index brought up to date."""
        # Forgotten messages stay out of what the router reads, as out of any context.
        hidden = await exclusions(s, msg.user_id)
        await self.index.refresh(s, msg.user_id, hidden.message_ids)
        pinned = await _object_tasks(s, msg)
        talk = await recent_conversation(
            s,
            msg.user_id,
            msg.id,
            ctx.settings.routing_conversation_turns,
            hidden.message_ids,
            hidden.step_keys,
        )
        return msg.text, pinned, talk

    async def _decide(
        self,
        ctx: RouteContext,
        user_id: str,
        text: str,
        vector: list[float],
        cands: list[Candidate],
        talk: Conversation,
    ) -> tuple[dict[str, Any], list[Candidate], int]:
        """The router's call; a `new` task is checked for duplicates with a second call.
        Returns the call, the candidates it was shown and the number of model calls."""
        now = ctx.clock()
        call = await self._ask(
            route_request(
                text, cands, now, catalogue_text(), talk.lines(now), detect_language(text)
            )
        )
        if call["decision"] != "new":
            return call, cands, 1
        async with self.db.session() as s:
            suspects = await likely_duplicates(
                self.index, s, user_id, text, vector, ctx.settings.routing_duplicate_window
            )
        if not suspects:
            return call, cands, 1
        second = await self._ask(duplicate_request(text, suspects, now, catalogue_text()))
        if second["decision"] != "new":
            call = {**call, **second}
            shown = {c.task_id for c in cands}
            cands = cands + [c for c, *_ in suspects if c.task_id not in shown]
        return call, cands, 2

    async def _ask(self, req: ModelRequest) -> dict[str, Any]:
        resp = await self.provider.complete(req)
        call = route_call(resp.tool_uses)
        if call is None or call.get("decision") not in (*DECISIONS, MOVE):
            raise Unroutable("InvalidRoute", f"router answered without a valid route: {call}")
        return call


async def _object_tasks(s: AsyncSession, msg: MessageRow) -> list[str]:
    """The tasks that hold the object the message points at (candidates the router sees)."""
    object_id = (msg.target or {}).get("object_id")
    if not object_id:
        return []
    rows = await s.scalars(select(TaskObject.task_id).where(TaskObject.object_id == object_id))
    return list(rows)

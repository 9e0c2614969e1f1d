"""Seeding a person's task index for routing tests, and a model wrapper that counts calls."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from activities.routing import RoutingActivities
from cards.store import create_card
from llm.types import ModelProvider, ModelRequest, ModelResponse
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.models import MessageRow, Task, TaskObject, WorkObject
from lomo.ids import new_id
from routing.models import RoutingRecord
from routing.types import RoutePlan, RouteRequest
from vectors.embeddings import Embedder

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # the injected clock of every routing test


class CountingProvider:
    """Wraps a provider and records every request it is asked (zero-call proofs, tokens)."""

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner
        self.name = f"counting-{inner.name}"
        self.requests: list[ModelRequest] = []
        self.input_tokens: list[int] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        resp = await self.inner.complete(request)
        self.input_tokens.append(resp.usage.input_tokens)
        return resp


class MemoEmbedder:
    """The same embedder, remembering vectors of texts it has seen: every case seeds the
    same worlds, so the eval embeds each distinct text once (same vectors, less CPU)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.name = inner.name
        self.memo: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self.lock:
            todo = [t for t in dict.fromkeys(texts) if t not in self.memo]
            if todo:
                self.memo.update(zip(todo, self.inner.embed(todo), strict=True))
            return [self.memo[t] for t in texts]


@dataclass
class Seed:
    """One task of a seeded world; `age` is how long ago it was last active."""

    label: str
    goal: str
    kind: str = "persistent"
    status: str = "running"
    age: timedelta = timedelta(days=1)
    summary: str = ""
    objects: list[str] = field(default_factory=list)  # object names linked to the task
    language: str = "en"


@dataclass
class World:
    user_id: str
    tasks: dict[str, str]  # label -> task id
    objects: dict[str, str]  # object name -> object id
    cards: dict[str, str] = field(default_factory=dict)  # label -> a select card of that task


async def seed_world(db: Database, seeds: list[Seed], now: datetime = NOW) -> World:
    async with db.session() as s:
        user, _ = await create_user(s, "eval")
        world = World(user.id, {}, {})
        for sd in seeds:
            when = now - sd.age
            task = Task(
                id=new_id("tsk"),
                user_id=user.id,
                kind=sd.kind,
                status=sd.status,
                goal=sd.goal,
                summary=sd.summary,
                language=sd.language,
                created_at=when,
                updated_at=when,
            )
            s.add(task)
            await s.flush()
            world.tasks[sd.label] = task.id
            for name in sd.objects:
                obj = WorkObject(id=new_id("obj"), user_id=user.id, type="asset", name=name)
                s.add(obj)
                await s.flush()
                s.add(TaskObject(task_id=task.id, object_id=obj.id))
                world.objects[name] = obj.id
            card = await create_card(
                s,
                user_id=user.id,
                kind="select",
                title=f"Pick one for {sd.label}",
                options=[{"id": "a", "label": "A"}, {"id": "b", "label": "B"}],
                task_id=task.id,
            )
            world.cards[sd.label] = card.id
        await s.flush()
    return world


async def add_message(
    db: Database, user_id: str, text: str, task_id: str | None = None, **target: str
) -> str:
    async with db.session() as s:
        msg = MessageRow(
            id=new_id("msg"),
            user_id=user_id,
            text=text,
            target=target,
            routing_status="pending",
            deterministic=task_id is not None,
            decision="existing" if task_id else None,
            task_id=task_id,
        )
        s.add(msg)
    return msg.id


async def route(acts: RoutingActivities, user_id: str, message_id: str) -> RoutePlan:
    return await acts.route_message(RouteRequest(user_id, message_id))


async def model_calls(db: Database, key: str) -> int:
    async with db.session() as s:
        rec = await s.get(RoutingRecord, key)
        assert rec is not None
        return rec.model_calls

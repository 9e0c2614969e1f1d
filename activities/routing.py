"""The main thread's routing activities: thin adapters over the routing room
(`routing/route.py`, `routing/decide.py`). Each opens what the room needs, calls it and
returns its plan; a request the room calls unroutable fails without retries."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.routing_move import move_previous
from llm.types import ModelProvider
from lomo import clock as platform_clock
from lomo.db.engine import Database
from lomo.heartbeat import heartbeating
from lomo.settings import Settings
from routing.errors import Unroutable
from routing.index import TaskIndex
from routing.plans import RouteContext
from routing.route import Router
from routing.types import RoutePlan, RouteRequest
from vectors.base import VectorIndex
from vectors.embeddings import Embedder, get_embedder


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
        self.router = Router(db, provider, self.index)

    @activity.defn(name="route_message")
    async def route_message(self, inp: RouteRequest) -> RoutePlan:
        try:
            # Routing may ask the model: a dead worker's call is retried after the
            # heartbeat timeout, not the whole start-to-close.
            async with heartbeating():
                if self.settings.fault_hang_in_route:
                    await asyncio.sleep(3600)  # TEST-ONLY (LOMO_FAULT_HANG_IN_ROUTE)
                return await self.router.route(self._context(), inp.user_id, inp.message_id)
        except Unroutable as e:
            raise ApplicationError(str(e), type=e.kind, non_retryable=True) from e

    @activity.defn(name="route_failed")
    async def route_failed(self, inp: RouteRequest) -> None:
        """Routing gave up on an item: the person hears so (idempotent per item)."""
        await self.router.failed(self._context(), inp.user_id, inp.message_id)

    def _context(self) -> RouteContext:
        return RouteContext(self.settings, self.clock, _origin(), move_previous)

    def all(self) -> list[Any]:
        return [self.route_message, self.route_failed]


def _origin() -> str:
    """Which activity routes: one activity's attempts share it, a second one does not."""
    if not activity.in_activity():
        return ""
    info = activity.info()
    return f"{info.workflow_id}/{info.workflow_run_id}/{info.activity_id}"

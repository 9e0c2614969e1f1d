"""An in-process stack for tests: real sim + api over HTTP, a real worker, real Temporal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from activities.registry import build_activities
from api.app import create_app
from cli.worker import make_worker
from llm.types import ModelProvider
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.settings import Settings
from sim.app import create_app as create_sim
from tests.helpers import ThreadServer, free_port, sim_auth


@dataclass
class Stack:
    settings: Settings
    api: httpx.AsyncClient
    sim: httpx.AsyncClient
    db: Database
    token: str
    user_id: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@asynccontextmanager
async def running_stack(
    tmp: Path,
    db_url: str,
    temporal_address: str,
    client: Client,
    task_queue: str,
    provider: ModelProvider | None = None,
    in_process_worker: bool = True,
    **overrides: Any,
) -> AsyncIterator[Stack]:
    """`in_process_worker=False` leaves the worker to the test (e.g. a real process it can
    kill); `overrides` are Settings fields."""
    api_port, sim_port = free_port(), free_port()
    settings = Settings(
        data_dir=tmp,
        database_url=db_url,
        temporal_address=temporal_address,
        task_queue=task_queue,
        api_port=api_port,
        sim_port=sim_port,
        **{"generation_wait_seconds": 5.0, "model_provider": "offline", **overrides},
    )
    db = Database(db_url)
    async with db.session() as s:
        user, token = await create_user(s, "tester")
    sim_app = create_sim(
        tmp / "sim",
        settings.callback_secret.get_secret_value(),
        speed=0.05,
        token=settings.sim_token.get_secret_value(),
    )
    with (
        ThreadServer(sim_app, sim_port) as sim_srv,
        ThreadServer(create_app(settings), api_port) as api_srv,
    ):
        async with (
            httpx.AsyncClient(timeout=30) as http,
            httpx.AsyncClient(base_url=api_srv.url, timeout=30) as api,
            httpx.AsyncClient(base_url=sim_srv.url, timeout=30, headers=sim_auth(settings)) as sim,
        ):
            stack = Stack(settings, api, sim, db, token, user.id)
            if not in_process_worker:
                yield stack
            else:
                acts = build_activities(settings, db, http, provider)
                async with make_worker(client, settings, acts):
                    yield stack
    await db.dispose()

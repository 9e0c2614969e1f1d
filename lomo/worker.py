"""The worker process: every workflow and activity on the task queue."""

from __future__ import annotations

import asyncio
import logging

import httpx
from temporalio.client import Client
from temporalio.worker import Worker

from activities.runtime import RuntimeActivities
from lomo.db.engine import Database
from lomo.llm.providers import build_provider
from lomo.llm.types import ModelProvider
from lomo.settings import Settings
from lomo.temporal import connect
from workflows.main_thread import MainThreadWorkflow
from workflows.task import TaskWorkflow
from workspace.store import AssetStore

log = logging.getLogger(__name__)
WORKFLOWS = [TaskWorkflow, MainThreadWorkflow]


def build_activities(
    settings: Settings, db: Database, http: httpx.AsyncClient, provider: ModelProvider | None = None
) -> RuntimeActivities:
    return RuntimeActivities(
        db=db,
        provider=provider or build_provider(settings),
        http=http,
        assets=AssetStore(settings.resolved_asset_dir),
        sim_url=settings.resolved_sim_url,
        callback_url=f"{settings.resolved_api_url}/v1/generation/callbacks",
        max_steps_per_turn=settings.max_steps_per_turn,
        generation_wait_seconds=settings.generation_wait_seconds,
    )


def make_worker(client: Client, settings: Settings, acts: RuntimeActivities) -> Worker:
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=WORKFLOWS,
        activities=acts.all(),
    )


async def run_worker(settings: Settings) -> None:
    db = Database(settings.resolved_database_url)
    async with httpx.AsyncClient(timeout=30.0) as http:
        client = await connect(settings)
        worker = make_worker(client, settings, build_activities(settings, db, http))
        log.info("worker polling %s on %s", settings.task_queue, settings.resolved_temporal_address)
        try:
            await worker.run()
        finally:
            await db.dispose()


def main(settings: Settings) -> None:
    asyncio.run(run_worker(settings))

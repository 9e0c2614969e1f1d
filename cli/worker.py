"""The worker process: every workflow and activity on the task queue."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import uvloop
from temporalio.client import Client
from temporalio.worker import Worker

from activities.registry import build_activities
from lomo import telemetry
from lomo.db.engine import Database
from lomo.events import commit_relay
from lomo.settings import Settings
from lomo.temporal import connect
from workflows.flow_run import FlowRunWorkflow
from workflows.main_thread import MainThreadWorkflow
from workflows.memory import MemoryWorkflow
from workflows.task import TaskWorkflow

log = logging.getLogger(__name__)
WORKFLOWS = [TaskWorkflow, MainThreadWorkflow, MemoryWorkflow, FlowRunWorkflow]


def make_worker(client: Client, settings: Settings, activities: list[Any]) -> Worker:
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=WORKFLOWS,
        activities=activities,
    )


async def run_worker(settings: Settings) -> None:
    # The worker's events (replies, statuses) wake the api's streams at once (on Postgres
    # by the events' NOTIFY, on SQLite through the host's relay).
    url = settings.resolved_database_url
    db = Database(url, relay=commit_relay(url, settings.bell_dir))
    async with httpx.AsyncClient(timeout=30.0) as http:
        provider = telemetry.tracer_provider(settings, "lomo-worker")
        client = await connect(
            settings, telemetry.temporal_runtime(), telemetry.temporal_interceptors(provider)
        )
        telemetry.serve_metrics(settings.worker_metrics_port, settings.host)
        worker = make_worker(client, settings, build_activities(settings, db, http))
        log.info("worker polling %s on %s", settings.task_queue, settings.resolved_temporal_address)
        try:
            await worker.run()
        finally:
            await db.dispose()


def main(settings: Settings) -> None:
    # uvloop: the worker's own loop (activities, pollers) costs less CPU per task; the
    # workflows run on the SDK's deterministic loop either way.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run_worker(settings))

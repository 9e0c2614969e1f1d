"""The worker process: every workflow and activity on the task queue."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import uvloop
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig

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
from workflows.versioned import VERSIONED

log = logging.getLogger(__name__)
WORKFLOWS = [TaskWorkflow, MainThreadWorkflow, MemoryWorkflow, FlowRunWorkflow]


def deployment(settings: Settings) -> WorkerDeploymentConfig | None:
    """This worker's build in the deployment, when versioned (workflows/versioned.py says
    how each workflow's runs move between builds)."""
    if not settings.worker_build_id:
        return None
    version = WorkerDeploymentVersion(settings.deployment_name, settings.worker_build_id)
    return WorkerDeploymentConfig(version=version, use_worker_versioning=True)


def make_worker(
    client: Client, settings: Settings, activities: list[Any], workflows: list[type] | None = None
) -> Worker:
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=workflows or (VERSIONED if settings.worker_build_id else WORKFLOWS),
        activities=activities,
        deployment_config=deployment(settings),
    )


async def run_worker(settings: Settings, workflows: list[type] | None = None) -> None:
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
        worker = make_worker(client, settings, build_activities(settings, db, http), workflows)
        log.info("worker polling %s on %s", settings.task_queue, settings.resolved_temporal_address)
        try:
            await worker.run()
        finally:
            await db.dispose()


def main(settings: Settings, workflows: list[type] | None = None) -> None:
    # uvloop: the worker's own loop (activities, pollers) costs less CPU per task; the
    # workflows run on the SDK's deterministic loop either way.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run_worker(settings, workflows))

"""The worker process: every workflow and activity on the task queue."""

from __future__ import annotations

import asyncio
import logging
import signal
from datetime import timedelta
from typing import Any

import httpx
import uvloop
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.registry import build_activities
from lomo import telemetry
from lomo.db.engine import Database
from lomo.events import commit_relay
from lomo.settings import Settings
from lomo.temporal import connect
from workflows.flow_run import FlowRunWorkflow
from workflows.main_thread import MainThreadWorkflow
from workflows.memory import MemoryWorkflow
from workflows.nudge import NudgeWorkflow
from workflows.task import TaskWorkflow
from workflows.versioned import VERSIONED

log = logging.getLogger(__name__)
WORKFLOWS = [TaskWorkflow, MainThreadWorkflow, MemoryWorkflow, FlowRunWorkflow, NudgeWorkflow]
# The project's packages a workflow reaches. None keeps mutable module state a run could
# leak to another, so all runs share one import of them instead of each run executing
# its own copy in the sandbox (docs/benchmarks.md, "Parked tasks"). The sandbox still
# guards determinism where it matters: tests/test_replay.py replays every workflow's
# histories under the SDK's default, strict runner.
OWN_PACKAGES = (
    "workflows",
    "activities",
    "memory",
    "nudges",
    "lomo",
    "flows",
    "money",
    "routing",
    "workspace",
    "context",
    "journal",
    "tools",
    "llm",
    "vectors",
    "standin",
)


def workflow_runner() -> SandboxedWorkflowRunner:
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*OWN_PACKAGES)
    return SandboxedWorkflowRunner(restrictions=restrictions)


def deployment(settings: Settings) -> WorkerDeploymentConfig | None:
    """This worker's build in the deployment, when versioned (workflows/versioned.py says
    how each workflow's runs move between builds)."""
    if not settings.worker_build_id:
        return None
    version = WorkerDeploymentVersion(settings.deployment_name, settings.worker_build_id)
    return WorkerDeploymentConfig(version=version, use_worker_versioning=True)


def make_worker(
    client: Client,
    settings: Settings,
    activities: list[Any],
    workflows: list[type] | None = None,
    drain_seconds: float = 0.0,
) -> Worker:
    """`drain_seconds`: how long running activities may go on once shutdown starts."""
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=workflows or (VERSIONED if settings.worker_build_id else WORKFLOWS),
        activities=activities,
        deployment_config=deployment(settings),
        workflow_runner=workflow_runner(),
        graceful_shutdown_timeout=timedelta(seconds=drain_seconds),
    )


def drain_on_sigterm(worker: Worker) -> None:
    """SIGTERM (a rolling update, `docker stop`) stops polling and lets running activities
    finish within the worker's graceful timeout; what is still running then is cancelled
    and retried elsewhere. A second SIGTERM is the same request."""
    loop = asyncio.get_running_loop()
    pending: list[asyncio.Task[None]] = []

    def shutdown() -> None:
        if not pending:
            log.info("SIGTERM: draining the worker")
            pending.append(loop.create_task(worker.shutdown()))

    loop.add_signal_handler(signal.SIGTERM, shutdown)


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
        acts = build_activities(settings, db, http)
        # Running activities get as long as a heartbeat timeout to finish: past it the
        # server would retry them elsewhere anyway (the pod's grace period is longer).
        worker = make_worker(client, settings, acts, workflows, settings.heartbeat_timeout_seconds)
        drain_on_sigterm(worker)
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

"""Flow runs (README "Flows"): start a run of a flow object, read its progress per node,
resume an ended run after fixing a node. The run itself is FlowRunWorkflow."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field
from sqlalchemy import select
from temporalio.client import Client

from api.deps import DbDep, SettingsDep, TemporalDep, UserDep
from api.dispatch.flows import start_flow_run
from flows import runs
from flows.models import FlowRun
from lomo.db.engine import Database
from lomo.settings import Settings
from workspace.store import get_object

router = APIRouter(tags=["flows"])


class NodeView(BaseModel):
    status: Literal["pending", "running", "done", "reused", "failed", "blocked", "removed"]
    hash: str | None = Field(description="content hash the node ran (or was reused) under")
    version: int | None = Field(description="the flow version the node ran on")
    order_id: str | None
    object_id: str | None = Field(description="the node's result (an asset or document)")
    error: str | None
    stale: bool = Field(description="the node's definition (or an input) changed after it ran")


class Progress(BaseModel):
    total: int
    done: int = Field(description="finished nodes, reused ones included")
    reused: int
    running: int
    failed: int
    blocked: int = Field(description="not run because an input failed")


class Price(BaseModel):
    amount_cents: int = Field(description="quoted total of the nodes that must run")
    currency: Literal["EUR"]


class RunView(BaseModel):
    run_id: str
    flow_id: str
    task_id: str | None
    status: Literal["planning", "waiting_price", "running", "succeeded", "failed", "declined"]
    reason: str = Field(description="why it failed or was declined (each failed node)")
    attempt: int
    version: int
    price: Price
    card_id: str | None = Field(description="the run's price card, if one was asked")
    progress: Progress
    nodes: dict[str, NodeView]
    created_at: str | None
    ended_at: str | None


class RunList(BaseModel):
    runs: list[RunView]


class RunIn(BaseModel):
    # The task that owns the run (its orders, its price card, its progress line); default:
    # the task that made or last read the flow. Paid nodes need one.
    task_id: str | None = Field(default=None, max_length=40)


@router.post("/v1/objects/{object_id}/runs", status_code=202, response_model=RunView)
async def start(
    object_id: str,
    user: UserDep,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalDep,
    body: RunIn | None = None,
) -> dict[str, Any]:
    """Run the flow's current version: 202 with the run (status `planning`); 409 `conflict`
    with `run_id` while another run of this flow is active; 400 `invalid_flow` for a graph
    that cannot run (cycle, unknown node type)."""
    async with db.session() as s:
        run = await runs.open_run(s, user.id, object_id, body.task_id if body else None)
        view = runs.run_view(run, {})
    await _start(db, temporal, settings, run.id, run.attempt)
    return view


@router.get("/v1/objects/{object_id}/runs", response_model=RunList)
async def list_runs(object_id: str, user: UserDep, db: DbDep) -> dict[str, Any]:
    """The flow's runs, newest first (at most 50)."""
    async with db.session() as s:
        await get_object(s, user.id, object_id)  # another person's flow: 404, as unknown
        rows = await s.scalars(
            select(FlowRun)
            .where(FlowRun.user_id == user.id, FlowRun.flow_id == object_id)
            .order_by(FlowRun.created_at.desc())
            .limit(50)
        )
        return {"runs": [runs.run_view(r, await runs.node_rows(s, r.id)) for r in rows]}


@router.get("/v1/flow-runs/{run_id}", response_model=RunView)
async def get_run(run_id: str, user: UserDep, db: DbDep) -> dict[str, Any]:
    """Status, progress (n of m nodes done, failed, blocked) and every node: status, the
    content hash it ran under, its order and result asset, error, stale."""
    async with db.session() as s:
        run = await runs.get_run(s, user.id, run_id)
        return runs.run_view(run, await runs.node_rows(s, run.id))


@router.post("/v1/flow-runs/{run_id}/resume", status_code=202, response_model=RunView)
async def resume(
    run_id: str, user: UserDep, db: DbDep, settings: SettingsDep, temporal: TemporalDep
) -> dict[str, Any]:
    """The next attempt of an ended run, on the flow's current version: finished nodes are
    reused, failed and blocked ones run again. 409 while the run is still active."""
    async with db.session() as s:
        run = await runs.resume_run(s, user.id, run_id)
        view = runs.run_view(run, await runs.node_rows(s, run.id))
    await _start(db, temporal, settings, run.id, run.attempt)
    return view


async def _start(db: Database, temporal: Client, settings: Settings, run_id: str, n: int) -> None:
    try:
        await start_flow_run(temporal, settings, run_id, n)
    except Exception:
        async with db.session() as s:  # never leave a run "planning" that nothing runs
            await runs.abandon(s, run_id, "the run could not be started; try again")
        raise

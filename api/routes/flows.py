"""Flow runs: start a run of a flow object, read its progress per node, resume an ended
run after fixing a node. The run itself is FlowRunWorkflow."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import CurrentUser, DbDep, PageDep, SessionDep, SettingsDep, TemporalDep
from api.schemas.flows import RunIn, RunList, RunView
from api.services import flows

router = APIRouter(tags=["flows"])


@router.post("/v1/objects/{object_id}/runs", status_code=202)
async def start(
    object_id: str,
    user: CurrentUser,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalDep,
    body: RunIn | None = None,
) -> RunView:
    """Run the flow's current version: 202 with the run (status `planning`); 409 `conflict`
    with `run_id` while another run of this flow is active; 400 `invalid_flow` for a graph
    that cannot run (cycle, unknown node type)."""
    task_id = body.task_id if body else None
    return await flows.start(db, temporal, settings, user.id, object_id, task_id)


@router.get("/v1/objects/{object_id}/runs")
async def list_runs(
    object_id: str, user: CurrentUser, session: SessionDep, page: PageDep
) -> RunList:
    """The flow's runs, newest first, a page at a time."""
    return await flows.list_runs(session, user.id, object_id, page)


@router.get("/v1/flow-runs/{run_id}")
async def get_run(run_id: str, user: CurrentUser, session: SessionDep) -> RunView:
    """Status, progress (n of m nodes done, failed, blocked) and every node: status, the
    content hash it ran under, its order and result asset, error, stale."""
    return await flows.read_run(session, user.id, run_id)


@router.post("/v1/flow-runs/{run_id}/resume", status_code=202)
async def resume(
    run_id: str, user: CurrentUser, db: DbDep, settings: SettingsDep, temporal: TemporalDep
) -> RunView:
    """The next attempt of an ended run, on the flow's current version: finished nodes are
    reused, failed and blocked ones run again. 409 while the run is still active."""
    return await flows.resume(db, temporal, settings, user.id, run_id)

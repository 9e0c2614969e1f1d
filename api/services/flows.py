"""Flow runs: open a run of a flow object (or the next attempt of an ended one) and start
its FlowRunWorkflow; read runs and their nodes."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client

from api.dispatch.flows import start_flow_run
from api.schemas.flows import RunList, RunView
from api.services.pages import finish
from flows import runs
from flows.models import FlowRun
from lomo.db.engine import Database
from lomo.db.pages import Page, by_creation
from lomo.settings import Settings
from workspace.store import get_object


async def start(
    db: Database,
    temporal: Client,
    settings: Settings,
    user_id: str,
    object_id: str,
    task_id: str | None,
) -> RunView:
    """A run of the flow's current version, stored, then started."""
    async with db.session() as s:
        run = await runs.open_run(s, user_id, object_id, task_id)
        view = RunView.model_validate(runs.run_view(run, {}))
    await _start(db, temporal, settings, run.id, run.attempt)
    return view


async def resume(
    db: Database, temporal: Client, settings: Settings, user_id: str, run_id: str
) -> RunView:
    """The next attempt of an ended run: finished nodes are reused, failed and blocked
    ones run again."""
    async with db.session() as s:
        run = await runs.resume_run(s, user_id, run_id)
        view = RunView.model_validate(runs.run_view(run, await runs.node_rows(s, run.id)))
    await _start(db, temporal, settings, run.id, run.attempt)
    return view


async def _start(db: Database, temporal: Client, settings: Settings, run_id: str, n: int) -> None:
    try:
        await start_flow_run(temporal, settings, run_id, n)
    except Exception:
        async with db.session() as s:  # never leave a run "planning" that nothing runs
            await runs.abandon(s, run_id, "the run could not be started; try again")
        raise


async def list_runs(s: AsyncSession, user_id: str, object_id: str, page: Page) -> RunList:
    """Newest first."""
    await get_object(s, user_id, object_id)  # another person's flow: 404, as unknown
    this_flow = [FlowRun.user_id == user_id, FlowRun.flow_id == object_id]
    q = await by_creation(
        s,
        select(FlowRun).where(*this_flow),
        FlowRun.created_at,
        FlowRun.id,
        page,
        descending=True,
        scope=this_flow,
    )
    rows, after = finish(list(await s.scalars(q)), page, lambda r: r.id)
    views = [runs.run_view(r, await runs.node_rows(s, r.id)) for r in rows]
    return RunList.model_validate({"runs": views, "next": after})


async def read_run(s: AsyncSession, user_id: str, run_id: str) -> RunView:
    run = await runs.get_run(s, user_id, run_id)
    return RunView.model_validate(runs.run_view(run, await runs.node_rows(s, run.id)))

"""Flow runs in the DB, free of HTTP and Temporal: creating and resuming a run, node rows,
the result cache, and the views the api and a task's context show."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from flows.graph import validate_graph
from flows.models import FlowResult, FlowRun, FlowRunNode
from lomo.db.models import ObjectVersion, Task, TaskObject, WorkObject
from lomo.errors import Conflict, InvalidInput, NotFound
from lomo.ids import new_id
from lomo.states import ACTIVE_FLOW_RUN, FINISHED_FLOW_NODE, FlowNodeStatus, FlowRunStatus


def now() -> datetime:
    return datetime.now(UTC)


async def active_run(s: AsyncSession, flow_id: str) -> FlowRun | None:
    run: FlowRun | None = await s.scalar(
        select(FlowRun)
        .where(FlowRun.flow_id == flow_id, FlowRun.status.in_(ACTIVE_FLOW_RUN))
        .order_by(FlowRun.created_at.desc())
    )
    return run


async def create_run(
    s: AsyncSession, user_id: str, flow_id: str, version: int, task_id: str | None
) -> FlowRun:
    """A new run of the flow; one run of a flow is active at a time (Conflict otherwise,
    naming it)."""
    running = await active_run(s, flow_id)
    if running is not None:
        raise Conflict(f"flow {flow_id} is already running as {running.id}", run_id=running.id)
    run = FlowRun(
        id=new_id("frn"),
        user_id=user_id,
        flow_id=flow_id,
        task_id=task_id,
        attempt=1,
        status=FlowRunStatus.PLANNING,
        version=version,
        total_nodes=0,
        price_cents=0,
        reason="",
    )
    s.add(run)
    await s.flush()
    return run


async def open_run(s: AsyncSession, user_id: str, flow_id: str, task_id: str | None) -> FlowRun:
    """Check the flow (it exists, is a flow, its graph can run) and the owning task (named,
    else the task that made or read the flow most recently), then create the run."""
    obj = await s.get(WorkObject, flow_id, populate_existing=True)
    if obj is None or obj.user_id != user_id or obj.deleted:
        raise NotFound(f"no flow {flow_id}")
    if obj.type != "flow":
        raise InvalidInput(f"object {flow_id} is a {obj.type}, not a flow")
    ver = await s.get(ObjectVersion, (flow_id, obj.version))
    assert ver is not None
    validate_graph(dict((ver.content or {}).get("nodes") or {}))
    if task_id is not None:
        task = await s.get(Task, task_id)
        if task is None or task.user_id != user_id:
            raise NotFound(f"no task {task_id}")
    else:
        task_id = await s.scalar(
            select(TaskObject.task_id)
            .join(Task, Task.id == TaskObject.task_id)
            .where(TaskObject.object_id == flow_id)
            .order_by((TaskObject.role == "artifact").desc(), Task.updated_at.desc())
        )
    return await create_run(s, user_id, flow_id, obj.version, task_id)


async def abandon(s: AsyncSession, run_id: str, reason: str) -> None:
    """A run whose workflow could not be started: ended, so the flow can run again."""
    run = await s.get(FlowRun, run_id, with_for_update=True)
    if run is not None and run.status == FlowRunStatus.PLANNING:
        run.status, run.reason, run.ended_at = FlowRunStatus.FAILED, reason, now()


async def get_run(s: AsyncSession, user_id: str, run_id: str, lock: bool = False) -> FlowRun:
    run = await s.get(FlowRun, run_id, with_for_update=lock, populate_existing=True)
    if run is None or run.user_id != user_id:
        raise NotFound(f"no flow run {run_id}")
    return run


async def resume_run(s: AsyncSession, user_id: str, run_id: str) -> FlowRun:
    """The next attempt of an ended run: finished nodes are reused, the rest run again."""
    run = await get_run(s, user_id, run_id, lock=True)
    if run.status in ACTIVE_FLOW_RUN:
        raise Conflict(f"flow run {run_id} is {run.status}; only an ended run resumes")
    other = await active_run(s, run.flow_id)
    if other is not None:
        raise Conflict(f"flow {run.flow_id} is already running as {other.id}", run_id=other.id)
    run.attempt += 1
    run.status, run.reason, run.ended_at, run.updated_at = FlowRunStatus.PLANNING, "", None, now()
    return run


async def node_rows(s: AsyncSession, run_id: str) -> dict[str, FlowRunNode]:
    rows = await s.scalars(select(FlowRunNode).where(FlowRunNode.run_id == run_id))
    return {r.node_id: r for r in rows}


async def node_row(s: AsyncSession, run_id: str, node_id: str) -> FlowRunNode:
    row = await s.get(FlowRunNode, (run_id, node_id), with_for_update=True)
    if row is None:
        row = FlowRunNode(
            run_id=run_id, node_id=node_id, status=FlowNodeStatus.PENDING, stale=False
        )
        s.add(row)
        await s.flush()
    return row


async def previous_bases(s: AsyncSession, flow_id: str) -> dict[str, dict[str, Any]]:
    """Each node's basis when its latest result of this flow was made or reused (any run,
    this one's earlier attempts included): what a re-make is compared against."""
    rows = await s.scalars(
        select(FlowRunNode)
        .join(FlowRun, FlowRun.id == FlowRunNode.run_id)
        .where(
            FlowRun.flow_id == flow_id,
            FlowRunNode.status.in_(FINISHED_FLOW_NODE),
            FlowRunNode.basis.is_not(None),
        )
        .order_by(FlowRunNode.updated_at, FlowRunNode.run_id)
    )
    return {r.node_id: dict(r.basis or {}) for r in rows}  # the newest wins


async def cached(s: AsyncSession, flow_id: str) -> dict[tuple[str, str], FlowResult]:
    rows = await s.scalars(select(FlowResult).where(FlowResult.flow_id == flow_id))
    return {(r.node_id, r.hash): r for r in rows}


async def store_result(
    s: AsyncSession,
    user_id: str,
    flow_id: str,
    node_id: str,
    hash_: str,
    object_id: str,
    order_id: str | None,
) -> None:
    if await s.get(FlowResult, (flow_id, node_id, hash_)) is None:
        s.add(
            FlowResult(
                flow_id=flow_id,
                node_id=node_id,
                hash=hash_,
                user_id=user_id,
                object_id=object_id,
                order_id=order_id,
            )
        )
        await s.flush()


def run_view(run: FlowRun, nodes: dict[str, FlowRunNode]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for n in nodes.values():
        counts[n.status] = counts.get(n.status, 0) + 1
    return {
        "run_id": run.id,
        "flow_id": run.flow_id,
        "task_id": run.task_id,
        "status": run.status,
        "reason": run.reason,
        "attempt": run.attempt,
        "version": run.version,
        "price": {"amount_cents": run.price_cents, "currency": "EUR"},
        "card_id": run.card_id,
        "progress": {
            "total": run.total_nodes,
            "done": counts.get(FlowNodeStatus.DONE, 0) + counts.get(FlowNodeStatus.REUSED, 0),
            "reused": counts.get(FlowNodeStatus.REUSED, 0),
            "running": counts.get(FlowNodeStatus.RUNNING, 0),
            "failed": counts.get(FlowNodeStatus.FAILED, 0),
            "blocked": counts.get(FlowNodeStatus.BLOCKED, 0),
        },
        "nodes": {
            nid: {
                "status": n.status,
                "hash": n.hash,
                "version": n.version,
                "order_id": n.order_id,
                "object_id": n.object_id,
                "error": n.error,
                "stale": n.stale,
            }
            for nid, n in sorted(nodes.items())
        },
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "ended_at": run.ended_at.isoformat() if run.ended_at else None,
    }


async def _outputs(s: AsyncSession, run: FlowRun) -> list[str]:
    """The results nobody in the flow consumes (e.g. the final edit): node → asset."""
    ver = await s.get(ObjectVersion, (run.flow_id, run.version))
    nodes = dict(((ver.content if ver else None) or {}).get("nodes") or {})
    used = {i for n in nodes.values() for i in n.get("inputs", [])}
    rows = await node_rows(s, run.id)
    return [
        f"{n} → {rows[n].object_id}"
        for n in sorted(nodes)
        if n not in used and n in rows and rows[n].object_id
    ]


async def progress_lines(s: AsyncSession, task_id: str, limit: int = 3) -> list[str]:
    """What a task's dynamic context says about its flow runs (newest first)."""
    runs = list(
        await s.scalars(
            select(FlowRun)
            .where(FlowRun.task_id == task_id)
            .order_by(FlowRun.created_at.desc())
            .limit(limit)
        )
    )
    lines = []
    for run in runs:
        view = run_view(run, await node_rows(s, run.id))
        p = view["progress"]
        line = (
            f"flow run {run.id} of {run.flow_id} (v{run.version}): {run.status}, "
            f"{p['done']} of {p['total']} nodes done"
        )
        failed = [
            f"{n}: {v['error']}"
            for n, v in view["nodes"].items()
            if v["status"] == FlowNodeStatus.FAILED
        ]
        if failed:
            line += f"; failed: {'; '.join(failed[:5])}"
        if p["blocked"]:
            line += f"; {p['blocked']} blocked behind failures"
        stale = [n for n, v in view["nodes"].items() if v["stale"]]
        if stale:
            line += f"; stale (the flow changed after they ran): {', '.join(stale[:10])}"
        if run.status == FlowRunStatus.SUCCEEDED:
            line += f"; results: {', '.join(await _outputs(s, run))}"
        if run.status == FlowRunStatus.WAITING_PRICE and run.card_id:
            line += f"; waiting for the person's price card {run.card_id}"
        lines.append(line)
    return lines

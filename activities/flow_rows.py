"""Helpers of the flow activities (activities/flows.py): a node's generation request and
quote, the current flow version, leaf digests, node/run row changes and their events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from activities.flow_types import FlowPlan, NodeOutcome
from flows import runs
from flows.graph import PAID, Nodes, digest
from flows.models import FlowRun, FlowRunNode
from flows.uses import USES
from lomo.db.models import ObjectVersion
from lomo.errors import InvalidInput, NotFound
from lomo.events import append_event
from lomo.states import EventType, FlowNodeStatus
from money.catalogue import validate_request
from workspace.errors import Deleted
from workspace.store import get_version


def order_args(
    node: Mapping[str, Any], inputs: list[tuple[str, str]], context: str = ""
) -> dict[str, Any]:
    """The generation request of a paid node: its params, plus its inputs' assets (a video
    animates its first image input; an edit cuts its inputs in order) and the parts of its
    documents it uses (`context`, flows/uses.context_of) after its prompt."""
    args = {k: v for k, v in node.get("params", {}).items() if k != USES}
    if context:
        args["prompt"] = f"{args.get('prompt', '')}\n\n{context}".strip()
    if node["type"] == "edit":
        args.setdefault("prompt", "final edit")
        args["clips"] = [obj for _, obj in inputs]
    elif node["type"] in ("video", "3d"):
        image = next((obj for t, obj in inputs if t == "image"), None)
        if image and "reference_object_id" not in args:
            args["reference_object_id"] = image
    return args


def price_of(node_id: str, node: Any) -> int:
    try:
        return validate_request(PAID[node["type"]], order_args(node, [])).price_cents
    except InvalidInput:
        return 0  # refused when the node starts, naming the constraint; costs nothing


async def document_contents(
    s: AsyncSession, user_id: str, nodes: Nodes
) -> dict[str, dict[str, Any] | None]:
    """The current content of each document node's document (None: missing or deleted)."""
    out: dict[str, dict[str, Any] | None] = {}
    for nid, node in nodes.items():
        if node["type"] == "document":
            try:
                _, ver = await get_version(s, user_id, str(node["params"]["object_id"]))
                out[nid] = dict(ver.content or {})
            except (NotFound, Deleted):
                out[nid] = None
    return out


async def leaf_digests(s: AsyncSession, user_id: str, nodes: Nodes) -> dict[str, str]:
    """A document node's result is its document's current text: edited text, new hash."""
    out = {}
    for nid, content in (await document_contents(s, user_id, nodes)).items():
        oid = str(nodes[nid]["params"]["object_id"])
        out[nid] = f"{oid}@missing" if content is None else f"{oid}@{digest(content)}"
    return out


async def current_nodes(s: AsyncSession, run: FlowRun) -> tuple[int, Nodes]:
    _, ver = await get_version(s, run.user_id, run.flow_id)
    return ver.version, dict(ver.content.get("nodes") or {})


def fail_row(row: FlowRunNode, error: str, version: int) -> NodeOutcome:
    row.status, row.error = FlowNodeStatus.FAILED, error[:2000]
    return NodeOutcome("failed", version, order_id=row.order_id, error=row.error)


async def changed_since(s: AsyncSession, run: FlowRun, row: FlowRunNode) -> bool:
    """The node's definition now differs from the one it ran on (or it left the flow)."""
    if row.version is None:
        return False
    try:
        _, now_nodes = await current_nodes(s, run)
    except (NotFound, Deleted):
        return False
    used = await s.get(ObjectVersion, (run.flow_id, row.version))
    before = ((used.content if used else {}) or {}).get("nodes", {}).get(row.node_id)
    return now_nodes.get(row.node_id) != before


async def end_run(s: AsyncSession, run: FlowRun, status: str, reason: str) -> None:
    run.status, run.reason = status, reason[:4000]
    run.ended_at = run.updated_at = runs.now()
    await emit_run(s, run)


async def emit_run(s: AsyncSession, run: FlowRun) -> None:
    run.updated_at = runs.now()
    await append_event(
        s,
        run.user_id,
        EventType.FLOW_RUN,
        {
            "run_id": run.id,
            "flow_id": run.flow_id,
            "task_id": run.task_id,
            "status": run.status,
            "reason": run.reason,
        },
    )


async def emit_node(s: AsyncSession, run: FlowRun, row: FlowRunNode) -> None:
    row.updated_at = runs.now()
    await append_event(
        s,
        run.user_id,
        EventType.FLOW_NODE,
        {
            "run_id": run.id,
            "node_id": row.node_id,
            "status": row.status,
            "object_id": row.object_id,
            "error": row.error,
        },
    )


def plan_of(
    run: FlowRun,
    status: str,
    order: list[str],
    edges: dict[str, list[str]],
    finished: list[str],
    *,
    reason: str,
    settings: Any,
) -> FlowPlan:
    return FlowPlan(
        status=status,
        flow_id=run.flow_id,
        task_id=run.task_id,
        version=run.version,
        order=order,
        edges=edges,
        finished=finished,
        card_id=run.card_id,
        reason=reason,
        max_parallel=settings.flow_max_parallel,
        generation_wait_seconds=settings.generation_wait_seconds,
        card_wait_seconds=settings.card_wait_seconds,
        heartbeat_timeout_seconds=settings.heartbeat_timeout_seconds,
        generation_wait_max_seconds=settings.generation_wait_max_seconds,
        card_wait_max_seconds=settings.card_wait_max_seconds,
    )

"""Flow run activities: all I/O of `workflows/flow_run.py` (the tool is `flow_tools.py`).

A node goes through the same money layer as a task's own paid call: quote (catalogue),
authorize + reserve (`place_order`), the one submit (`submit_order`), then the order's
terminal transition settles or refunds it; its asset is collected as any generation's.
The call key is `flow:{run}:{node}:{attempt}` (flows/graph.call_key), so a retried
activity after a killed worker finds its order and never orders twice.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.flow_rows import (
    changed_since,
    current_nodes,
    document_contents,
    emit_node,
    emit_run,
    end_run,
    fail_row,
    leaf_digests,
    order_args,
    plan_of,
    price_of,
)
from activities.flow_types import (
    CloseInput,
    FlowGraph,
    FlowPlan,
    NodeInput,
    NodeOutcome,
    RunResult,
)
from activities.generation import GenerationActivities
from activities.types import OrderRef
from cards.store import create_card
from flows import runs
from flows.errors import FlowError
from flows.graph import (
    PAID,
    Nodes,
    PricePlan,
    call_key,
    descendants,
    edges_of,
    input_uses,
    narrowed_hash,
    price_plan,
    validate_graph,
)
from flows.models import FlowRun, FlowRunNode
from flows.remake import price_card, reasons
from flows.uses import context_of
from lomo.contracts.flow_run import FlowRunInput
from lomo.db.models import Card, GenerationOrder
from lomo.errors import InvalidInput, NotFound
from lomo.heartbeat import heartbeating
from lomo.language import task_language
from lomo.states import (
    ACTIVE_FLOW_RUN,
    FINISHED_FLOW_NODE,
    CardAction,
    CardKind,
    CardStatus,
    FlowNodeStatus,
    FlowRunStatus,
    OrderStatus,
)
from money.catalogue import validate_request
from money.ledger import lock_account
from money.orders import NeedsConfirmation, NeedsCredit, OrderRequest, Refused, place_order
from money.policy import authorize
from tools.base import ToolDeps
from tools.generation import submit_order
from workspace.errors import Deleted


def _plan_card_key(run: FlowRun) -> str:
    return f"flowplan:{run.id}:{run.attempt}"


class FlowActivities:
    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps
        self.gen = GenerationActivities(deps)

    async def _run(self, s: AsyncSession, run_id: str) -> FlowRun:
        run = await s.get(FlowRun, run_id, with_for_update=True, populate_existing=True)
        if run is None:
            raise ApplicationError(f"no flow run {run_id}", type="NotFound", non_retryable=True)
        return run

    @activity.defn(name="plan_flow_run")
    async def plan_flow_run(self, inp: FlowRunInput) -> FlowPlan:
        """Validate the graph, reuse cached results, price what must run and ask one price
        card for the total when the policy would ask (instead of a card per node)."""
        st = self.deps.settings
        async with self.deps.db.session() as s:
            run = await self._run(s, inp.run_id)
            try:
                version, nodes = await current_nodes(s, run)
                order = validate_graph(nodes)
            except (FlowError, NotFound, Deleted) as e:
                await end_run(s, run, FlowRunStatus.FAILED, e.detail)
                return plan_of(run, FlowRunStatus.FAILED, [], {}, [], reason=e.detail, settings=st)
            cache = await runs.cached(s, run.flow_id)
            leaf = await leaf_digests(s, run.user_id, nodes)
            docs = await document_contents(s, run.user_id, nodes)
            plan = price_plan(nodes, leaf, lambda n, h: (n, h) in cache, price_of, docs)
            before = await runs.previous_bases(s, run.flow_id)  # read before rows change
            rows = await runs.node_rows(s, run.id)
            for nid in order:
                row = rows.get(nid) or await runs.node_row(s, run.id, nid)
                row.hash, row.version, row.error, row.stale = plan.hashes[nid], version, None, False
                row.basis = plan.bases[nid]
                if nid in plan.reuse:
                    row.status, row.object_id = (
                        FlowNodeStatus.REUSED,
                        cache[(nid, plan.hashes[nid])].object_id,
                    )
                else:
                    row.status, row.object_id, row.order_id = FlowNodeStatus.PENDING, None, None
            for nid, row in rows.items():
                if nid not in nodes:
                    row.status = FlowNodeStatus.REMOVED
            run.version, run.total_nodes, run.price_cents = version, len(order), plan.total_cents
            status, reason = FlowRunStatus.RUNNING, ""
            if plan.total_cents > 0:
                status, reason = await self._authorize(s, run, plan, nodes, before)
            if status == FlowRunStatus.DECLINED:
                await end_run(s, run, FlowRunStatus.DECLINED, reason)
            else:
                run.status = status
                await emit_run(s, run)
            return plan_of(
                run, status, order, edges_of(nodes), plan.reuse, reason=reason, settings=st
            )

    async def _authorize(
        self,
        s: AsyncSession,
        run: FlowRun,
        plan: PricePlan,
        nodes: Nodes,
        before: dict[str, dict[str, Any]],
    ) -> tuple[FlowRunStatus, str]:
        if run.task_id is None:
            return FlowRunStatus.DECLINED, "a flow with paid nodes needs an owning task"
        key = _plan_card_key(run)
        card = await s.scalar(select(Card).where(Card.user_id == run.user_id, Card.key == key))
        if card is not None:
            run.card_id = card.id
            if card.status == CardStatus.OPEN:
                return FlowRunStatus.WAITING_PRICE, "waiting for the price card"
            if (card.answer or {}).get("action") == CardAction.CONFIRM:
                return FlowRunStatus.RUNNING, "the person confirmed the price"
            return FlowRunStatus.DECLINED, "the person declined the price of this run"
        total = plan.total_cents
        await lock_account(s, run.user_id, self.deps.settings.initial_credit_cents)
        decision = await authorize(s, run.user_id, run.task_id, key, total, self.deps.settings)
        if decision.grant is not None:
            return FlowRunStatus.RUNNING, decision.reason
        calls = {call_key(run.id, nid, run.attempt): p for nid, p in plan.prices.items() if p}
        lang = await task_language(s, run.task_id)
        # One card for the run: what is made again and why, the total, what is kept.
        paid = {nid for nid, node in nodes.items() if node["type"] in PAID}
        title, listing = price_card(plan, reasons(plan, before, paid), paid, lang)
        card = await create_card(
            s,
            user_id=run.user_id,
            kind=CardKind.PRICE,
            title=title,
            task_id=run.task_id,
            price_cents=total,
            payload={"flow_run": run.id, "flow_id": run.flow_id, "calls": calls, **listing},
            key=key,
        )
        run.card_id = card.id
        return FlowRunStatus.WAITING_PRICE, decision.reason

    @activity.defn(name="refresh_flow_run")
    async def refresh_flow_run(self, inp: FlowRunInput) -> FlowGraph:
        """The flow's current structure for nodes not yet started (the person edited it
        mid-run); an invalid edit keeps the graph the run has (empty order)."""
        async with self.deps.db.session() as s:
            run = await self._run(s, inp.run_id)
            version, nodes = await current_nodes(s, run)
            try:
                order = validate_graph(nodes)
            except FlowError:
                return FlowGraph(version, [], {})
            rows = await runs.node_rows(s, run.id)
            for nid in order:
                if nid not in rows:
                    await runs.node_row(s, run.id, nid)
            for nid, row in rows.items():
                if nid not in nodes and row.status == FlowNodeStatus.PENDING:
                    row.status = FlowNodeStatus.REMOVED
            run.version, run.total_nodes = version, len(order)
            return FlowGraph(version, order, edges_of(nodes))

    @activity.defn(name="start_flow_node")
    async def start_flow_node(self, inp: NodeInput) -> NodeOutcome:
        """Start one node on the flow's current version (an edit before it started is
        picked up): reuse a cached result, resolve a document, or place its paid order."""
        async with heartbeating():
            async with self.deps.db.session() as s:
                run = await self._run(s, inp.run_id)
                row = await runs.node_row(s, run.id, inp.node_id)
                if row.status in FINISHED_FLOW_NODE:
                    return NodeOutcome("done", row.version or run.version)
                if row.status == FlowNodeStatus.RUNNING and row.order_id:
                    order_id: str = row.order_id  # placed by an attempt that died: submit
                    version = row.version or run.version
                else:
                    started = await self._place(s, run, row)
                    if isinstance(started, NodeOutcome):
                        return started
                    order_id, version = started
            res = await submit_order(self.deps, order_id)
            if res.status == "error":
                return await self._failed(inp, str(res.result.get("error")), version)
            return NodeOutcome("submitted", version, order_id=order_id)

    async def _place(
        self, s: AsyncSession, run: FlowRun, row: FlowRunNode
    ) -> NodeOutcome | tuple[str, int]:
        version, nodes = await current_nodes(s, run)
        node = nodes.get(row.node_id)
        if node is None:
            row.status = FlowNodeStatus.REMOVED
            return NodeOutcome("removed", version)
        rows = await runs.node_rows(s, run.id)
        inputs = [rows.get(i) for i in node.get("inputs", [])]
        if any(r is None or r.status not in FINISHED_FLOW_NODE for r in inputs):
            return NodeOutcome("not_ready", version)  # the edit added an input: re-plan
        leaf = (await leaf_digests(s, run.user_id, {row.node_id: node})).get(row.node_id, "")
        docs = await document_contents(
            s, run.user_id, {i: nodes[i] for i in node.get("inputs", []) if i in nodes}
        )
        hashes = {r.node_id: r.hash or "" for r in inputs if r}
        h, row.basis = narrowed_hash(node, hashes, docs, leaf)
        row.hash, row.version, row.error = h, version, None
        hit = (await runs.cached(s, run.flow_id)).get((row.node_id, h))
        if hit is not None:
            row.status, row.object_id = FlowNodeStatus.REUSED, hit.object_id
            await emit_node(s, run, row)
            return NodeOutcome("done", version)
        if node["type"] == "document":
            oid = str(node["params"]["object_id"])
            if leaf.endswith("@missing"):
                return fail_row(row, f"document {oid} does not exist (or was deleted)", version)
            await runs.store_result(s, run.user_id, run.flow_id, row.node_id, h, oid, None)
            row.status, row.object_id = FlowNodeStatus.DONE, oid
            await emit_node(s, run, row)
            return NodeOutcome("done", version)
        kind = PAID[node["type"]]
        types = {i: nodes[i]["type"] for i in node.get("inputs", []) if i in nodes}
        args = order_args(
            node,
            [(types.get(r.node_id, ""), r.object_id or "") for r in inputs if r],
            context_of(input_uses(node, hashes, docs).values()),
        )
        try:
            spec = validate_request(kind, args)
        except InvalidInput as e:
            return fail_row(row, e.detail, version)
        if run.task_id is None:
            return fail_row(row, "a paid node needs the run's owning task", version)
        key = call_key(run.id, row.node_id, run.attempt)
        req = OrderRequest(run.user_id, run.task_id, key, kind, spec.name, args, spec.price_cents)
        placed = await place_order(s, req, self.deps.settings)
        if isinstance(placed, Refused | NeedsCredit):  # a node does not wait for credit
            return fail_row(row, placed.reason, version)
        if isinstance(placed, NeedsConfirmation):
            return NodeOutcome("needs_confirmation", version, card_id=placed.card.id)
        row.status, row.order_id = FlowNodeStatus.RUNNING, placed.order.id
        await emit_node(s, run, row)
        return placed.order.id, version

    async def _failed(self, inp: NodeInput, error: str, version: int) -> NodeOutcome:
        async with self.deps.db.session() as s:
            run = await self._run(s, inp.run_id)
            row = await runs.node_row(s, inp.run_id, inp.node_id)
            out = fail_row(row, error, version)
            await emit_node(s, run, row)
            return out

    @activity.defn(name="finish_flow_node")
    async def finish_flow_node(self, inp: NodeInput) -> NodeOutcome:
        """The node's order ended: keep its asset as the node's result (and in the cache
        under its hash), or record why it failed. A result made on a definition the flow
        no longer has is kept but marked stale."""
        async with heartbeating():  # it collects the result: a download of unknown length
            return await self._finish(inp)

    async def _finish(self, inp: NodeInput) -> NodeOutcome:
        async with self.deps.db.session() as s:
            row = await runs.node_row(s, inp.run_id, inp.node_id)
            if row.status in FINISHED_FLOW_NODE or row.order_id is None:
                return NodeOutcome(row.status if row.status != FlowNodeStatus.REUSED else "done")
            order = await s.get(GenerationOrder, row.order_id)
            assert order is not None
            status, error = order.status, order.error
        version = row.version or 0
        if status in (OrderStatus.FAILED, OrderStatus.CANCELLED):
            return await self._failed(inp, error or f"generation {status}", version)
        if status != OrderStatus.SUCCEEDED:
            return NodeOutcome("submitted", version, order_id=row.order_id)
        await self.gen.collect_generation(OrderRef(row.order_id))
        async with self.deps.db.session() as s:
            run = await self._run(s, inp.run_id)
            row = await runs.node_row(s, inp.run_id, inp.node_id)
            order = await s.get(GenerationOrder, row.order_id, populate_existing=True)
            assert order is not None and order.object_id and row.hash
            await runs.store_result(
                s, run.user_id, run.flow_id, row.node_id, row.hash, order.object_id, order.id
            )
            row.status, row.object_id = FlowNodeStatus.DONE, order.object_id
            row.stale = await changed_since(s, run, row)
            await emit_node(s, run, row)
            return NodeOutcome("done", version, order_id=order.id)

    @activity.defn(name="close_flow_run")
    async def close_flow_run(self, inp: CloseInput) -> RunResult:
        async with self.deps.db.session() as s:
            run = await self._run(s, inp.run_id)
            rows = await runs.node_rows(s, run.id)
            for nid in inp.blocked:
                if nid in rows and rows[nid].status == FlowNodeStatus.PENDING:
                    rows[nid].status, rows[nid].error = (
                        FlowNodeStatus.BLOCKED,
                        "an input node failed",
                    )
            for row in rows.values():
                if row.status in FINISHED_FLOW_NODE and not row.stale:
                    row.stale = await changed_since(s, run, row)
            # A result built on a stale input is stale too (a re-run redoes both).
            try:
                _, nodes = await current_nodes(s, run)
            except (NotFound, Deleted):
                nodes = {}  # the flow was deleted meanwhile: nothing to compare against
            stale = [n for n, r in rows.items() if r.stale]
            for nid in descendants(edges_of(nodes), stale):
                if nid in rows and rows[nid].status in FINISHED_FLOW_NODE:
                    rows[nid].stale = True
            failed = sorted(n for n, r in rows.items() if r.status == FlowNodeStatus.FAILED)
            live = [r for r in rows.values() if r.status != FlowNodeStatus.REMOVED]
            done = sum(r.status in FINISHED_FLOW_NODE for r in live)
            status = FlowRunStatus.SUCCEEDED if done == len(live) else FlowRunStatus.FAILED
            reason = "; ".join(f"{n}: {rows[n].error}" for n in failed[:10])
            if run.status in ACTIVE_FLOW_RUN:
                await end_run(s, run, status, reason)
            return RunResult(run.status, done, failed, len(live))

    def all(self) -> list[Any]:
        return [
            self.plan_flow_run,
            self.refresh_flow_run,
            self.start_flow_node,
            self.finish_flow_node,
            self.close_flow_run,
        ]

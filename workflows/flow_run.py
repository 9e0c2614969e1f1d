"""FlowRunWorkflow: one run of a flow object (id `flowrun:{run_id}`), a durable DAG.

Plan first (`plan_flow_run`: validate, reuse cached results, price what must run, one
price card for the total when the policy asks), then run every node whose inputs are done,
at most `max_parallel` at once; a paid node parks on its order (a `node_event` signal from
the callback, or a compensating poll after a timer). A failed node blocks only its
descendants; the rest of the graph still runs. An edit of the flow mid-run is seen when a
node starts on a newer version: nodes not started follow the new structure. The owning
task is signalled (`flow_event`) only when the run ends or needs the person. History holds
node ids and statuses only. A run parked on its price card continues as new when the
server suggests it (the plan is re-read from the database, the card found again); once
nodes run, a flow's node limit (lomo/limits.py) keeps the history small.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate

with workflow.unsafe.imports_passed_through():
    from activities.flow_types import (
        CloseInput,
        FlowPlan,
        NodeInput,
        NodeOutcome,
        RunResult,
    )
    from activities.flows import FlowActivities
    from activities.generation import GenerationActivities
    from activities.types import OrderRef
    from flows.graph import descendants, ready_nodes
    from lomo.contracts import flow_run as contract
    from lomo.contracts import task as task_contract
    from lomo.contracts.flow_run import FlowRunInput, FlowRunView
    from lomo.contracts.task import FlowEvent, GenerationEvent
    from lomo.states import TERMINAL_ORDER, OrderStatus
    from workflows.common import DB_TIMEOUT, RETRY, backoff, card_unanswered

FLOW_KEY = SearchAttributeKey.for_keyword("LomoFlowId")
FLOW_STATUS_KEY = SearchAttributeKey.for_keyword("LomoFlowStatus")
NODE_TIMEOUT = timedelta(minutes=2)


@workflow.defn(name=contract.WORKFLOW)
class FlowRunWorkflow:
    def __init__(self) -> None:
        self.orders: dict[str, str] = {}  # order id → last known status
        self.answered: set[str] = set()
        self.refresh = False
        self.status = "planning"
        self.nodes: dict[str, str] = {}  # node id → status, for the query
        self.version = 0
        self.seq = 0
        self.asked = False
        self.inp = FlowRunInput("")

    # --- inputs ------------------------------------------------------------------------
    @workflow.signal(name=contract.NODE_EVENT)
    def node_event(self, ev: GenerationEvent) -> None:
        if self.orders.get(ev.order_id) not in TERMINAL_ORDER:
            self.orders[ev.order_id] = ev.status

    @workflow.signal(name=contract.CARD_ANSWERED)
    def card_answered(self, card_id: str) -> None:
        self.answered.add(card_id)

    @workflow.query(name=contract.STATE)
    def state(self) -> FlowRunView:
        return FlowRunView(self.status, self.version, dict(self.nodes))

    # --- the run -----------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: FlowRunInput) -> str:
        self.inp, self.asked = inp, inp.asked
        plan = await self._plan()
        self._upsert(plan.flow_id, plan.status)
        while plan.status == "waiting_price":
            assert plan.card_id is not None
            await self._tell_task(plan, "needs_person")
            await self._wait_card(plan.card_id, plan, may_roll_over=True)
            plan = await self._plan()
            self._upsert(plan.flow_id, plan.status)
        if plan.status != "running":
            await self._tell_task(plan, plan.status)
            return plan.status
        result = await self._execute(plan)
        self._upsert(plan.flow_id, result.status)
        await self._tell_task(plan, result.status)
        return result.status

    async def _execute(self, plan: FlowPlan) -> RunResult:
        self.version = plan.version
        order, edges = list(plan.order), dict(plan.edges)
        done, failed = set(plan.finished), set[str]()
        started = set(done)
        self.nodes = {n: ("reused" if n in done else "pending") for n in order}
        running: dict[str, asyncio.Task[NodeOutcome]] = {}
        while True:
            if self.refresh:
                order, edges = await self._refresh(order, edges, started)
            blocked = descendants(edges, failed)
            free = max(0, plan.max_parallel - len(running))
            for nid in [n for n in ready_nodes(edges, order, done, started) if n not in blocked][
                :free
            ]:
                started.add(nid)
                self.nodes[nid] = "running"
                running[nid] = asyncio.ensure_future(self._node(nid, plan))
            if not running:
                break
            await workflow.wait_condition(
                lambda: self.refresh or any(t.done() for t in running.values())
            )
            for nid in [n for n, t in running.items() if t.done()]:
                out = running.pop(nid).result()
                if out.version > self.version:
                    self.refresh = True  # someone edited the flow: re-read its structure
                if out.status == "not_ready":
                    started.discard(nid)
                    self.nodes[nid] = "pending"
                    continue
                self.nodes[nid] = out.status
                (failed if out.status == "failed" else done).add(nid)
        stuck = sorted((descendants(edges, failed) - done) & set(edges))
        for nid in stuck:
            self.nodes[nid] = "blocked"
        return await workflow.execute_activity_method(
            FlowActivities.close_flow_run,
            CloseInput(self.inp.run_id, self.inp.attempt, stuck),
            start_to_close_timeout=DB_TIMEOUT,
            retry_policy=RETRY,
        )

    async def _node(self, nid: str, plan: FlowPlan) -> NodeOutcome:
        """One node: start it (reuse, free, or a paid order), park on its order, finish."""
        inp = NodeInput(self.inp.run_id, nid, self.inp.attempt)
        while True:
            out = await self._act(FlowActivities.start_flow_node, inp, plan)
            if out.status == "needs_confirmation" and out.card_id:
                await self._tell_task(plan, "needs_person")
                await self._wait_card(out.card_id, plan)
                continue
            if out.status != "submitted" or out.order_id is None:
                return out
            while True:
                await self._wait_order(out.order_id, plan)
                fin = await self._act(FlowActivities.finish_flow_node, inp, plan)
                if fin.status != "submitted":
                    return NodeOutcome(fin.status, out.version, fin.order_id, None, fin.error)
                self.orders[out.order_id] = OrderStatus.RUNNING  # not final after all: wait again

    async def _act(
        self,
        node_activity: Callable[[FlowActivities, NodeInput], Awaitable[NodeOutcome]],
        inp: NodeInput,
        plan: FlowPlan,
    ) -> NodeOutcome:
        self.seq += 1
        return await workflow.execute_activity_method(
            node_activity,
            inp,
            # The node's name in the Temporal UI's pending activities (the method's name is
            # its activity's name).
            activity_id=f"{inp.node_id}/{node_activity.__name__}/{self.seq}",
            start_to_close_timeout=NODE_TIMEOUT,
            heartbeat_timeout=timedelta(seconds=plan.heartbeat_timeout_seconds),
            retry_policy=RETRY,
        )

    async def _wait_order(self, order_id: str, plan: FlowPlan) -> None:
        """Its signal, or a compensating poll after each timer (a lost callback); the timer
        doubles up to a cap, and the poll fails a job past its deadline."""
        self.orders.setdefault(order_id, OrderStatus.SUBMITTED)
        polls = 0
        while self.orders[order_id] not in TERMINAL_ORDER:
            wait = backoff(plan.generation_wait_seconds, plan.generation_wait_max_seconds, polls)
            polls += 1
            try:
                await workflow.wait_condition(
                    lambda: self.orders[order_id] in TERMINAL_ORDER, timeout=wait
                )
            except TimeoutError:
                st = await workflow.execute_activity_method(
                    GenerationActivities.poll_generation,
                    OrderRef(order_id),
                    start_to_close_timeout=NODE_TIMEOUT,
                    heartbeat_timeout=timedelta(seconds=plan.heartbeat_timeout_seconds),
                    retry_policy=RETRY,
                )
                if self.orders[order_id] not in TERMINAL_ORDER:
                    self.orders[order_id] = st.status

    async def _wait_card(self, card_id: str, plan: FlowPlan, may_roll_over: bool = False) -> None:
        """Parked on the person; a timer re-reads the card (a lost wake-up). The timer
        doubles up to a cap, so a card left open for days adds a few re-reads; before any
        node runs (`may_roll_over`) the run continues as new when the server suggests it."""
        reads = 0
        while card_id not in self.answered:
            wait = backoff(plan.card_wait_seconds, plan.card_wait_max_seconds, reads)
            reads += 1
            try:
                await workflow.wait_condition(lambda: card_id in self.answered, timeout=wait)
            except TimeoutError:
                if not await card_unanswered(card_id):
                    self.answered.add(card_id)
                elif may_roll_over and workflow.info().is_continue_as_new_suggested():
                    workflow.continue_as_new(dataclasses.replace(self.inp, asked=self.asked))

    async def _plan(self) -> FlowPlan:
        plan = await workflow.execute_activity_method(
            FlowActivities.plan_flow_run,
            self.inp,
            start_to_close_timeout=DB_TIMEOUT,
            retry_policy=RETRY,
        )
        self.status = plan.status
        return plan

    async def _refresh(
        self, order: list[str], edges: dict[str, list[str]], started: set[str]
    ) -> tuple[list[str], dict[str, list[str]]]:
        self.refresh = False
        graph = await workflow.execute_activity_method(
            FlowActivities.refresh_flow_run,
            self.inp,
            start_to_close_timeout=DB_TIMEOUT,
            retry_policy=RETRY,
        )
        self.version = max(self.version, graph.version)
        if not graph.order:
            return order, edges  # the edit made the graph invalid: keep running the old one
        for nid in graph.order:
            self.nodes.setdefault(nid, "pending")
        for nid in set(edges) - set(graph.edges):
            if nid not in started:
                self.nodes[nid] = "removed"
        # Started nodes keep their place; the rest follow the new structure.
        merged = {**{n: edges[n] for n in started if n in edges}, **graph.edges}
        return [*graph.order, *(n for n in order if n not in graph.edges)], merged

    async def _tell_task(self, plan: FlowPlan, status: str) -> None:
        """Wake the owning task only for the end of the run or a question to the person."""
        if plan.task_id is None or (status == "needs_person" and self.asked):
            return
        self.asked = self.asked or status == "needs_person"
        # By name: TaskWorkflow starts this workflow as a child, so it is not imported here.
        handle = workflow.get_external_workflow_handle(task_contract.workflow_id(plan.task_id))
        try:
            await handle.signal(task_contract.FLOW_EVENT, FlowEvent(self.inp.run_id, status))
        except Exception:  # a task that ended has nobody to wake; the run is in the DB
            workflow.logger.info("task %s not running; flow_event dropped", plan.task_id)

    def _upsert(self, flow_id: str, status: str) -> None:
        self.status = status
        updates: list[SearchAttributeUpdate[Any]] = [
            FLOW_KEY.value_set(flow_id),
            FLOW_STATUS_KEY.value_set(status),
        ]
        workflow.upsert_search_attributes(updates)

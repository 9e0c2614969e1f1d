"""The flow activities' inputs and outputs (activities/flows.py), sent and read by
`FlowRunWorkflow`: ids, node ids and small values only; node definitions, results and
assets stay in the DB. The run's own input, `FlowRunInput`, is the workflow's contract
(lomo/contracts/flow_run.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FlowPlan:
    status: str  # running | waiting_price | declined | failed
    flow_id: str
    task_id: str | None
    version: int
    order: list[str]  # topological order of the nodes
    edges: dict[str, list[str]]  # node → its inputs
    finished: list[str]  # results reused from the cache
    card_id: str | None = None
    reason: str = ""
    # Limits come from the worker's settings through the plan: workflow code reads none.
    max_parallel: int = 4
    generation_wait_seconds: float = 60.0
    card_wait_seconds: float = 300.0
    heartbeat_timeout_seconds: float = 30.0
    generation_wait_max_seconds: float = 600.0
    card_wait_max_seconds: float = 3600.0


@dataclass
class FlowGraph:
    version: int
    order: list[str]
    edges: dict[str, list[str]]


@dataclass
class NodeInput:
    run_id: str
    node_id: str
    attempt: int


@dataclass
class NodeOutcome:
    # done (result stored or reused) | submitted (an order to await) | failed |
    # needs_confirmation (a price card) | removed (the node left the flow)
    status: str
    version: int = 0  # the flow version the node was started on
    order_id: str | None = None
    card_id: str | None = None
    error: str = ""


@dataclass
class CloseInput:
    run_id: str
    attempt: int
    blocked: list[str] = field(default_factory=list)


@dataclass
class RunResult:
    status: str  # succeeded | failed | declined
    done: int
    failed: list[str]
    total: int

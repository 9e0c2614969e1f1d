"""A flow as a dependency graph, as pure functions (no DB, no clock): validation, order,
readiness, descendants, content hashes and the pricing plan.

A node's hash covers its type, its params and, in order, the hashes of its inputs (a
Merkle chain), so a result stored under a hash is valid for exactly that node definition
fed by exactly those inputs: change one shot's prompt and its hash, and every hash below
it, changes; nothing else does. Leaf inputs that are not nodes (a document node's current
text) enter through `leaf_digests`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flows.errors import FlowError, FlowTooLargeToRun
from lomo.limits import MAX_FLOW_NODES

Node = Mapping[str, Any]
Nodes = Mapping[str, Node]

# Node type → generation kind of its order; a type not here is free.
PAID = {"image": "image", "video": "video", "audio": "audio", "3d": "3d", "edit": "video"}
FREE = ("document",)
NODE_TYPES = (*PAID, *FREE)
NODE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")


def validate_graph(nodes: Nodes) -> list[str]:
    """The nodes in a topological order; FlowError names what is wrong otherwise."""
    if not nodes:
        raise FlowError("a flow needs at least one node")
    if len(nodes) > MAX_FLOW_NODES:
        raise FlowTooLargeToRun(
            f"a flow has at most {MAX_FLOW_NODES} nodes, this one {len(nodes)}; "
            "split it into several flows",
            limit_nodes=MAX_FLOW_NODES,
        )
    for nid, node in nodes.items():
        if not NODE_ID.match(nid):
            raise FlowError(f"node id {nid!r}: 1-40 letters, digits, '_', '-', '.'")
        if node.get("type") not in NODE_TYPES:
            raise FlowError(
                f"node {nid}: type {node.get('type')!r} is not one of {', '.join(NODE_TYPES)}"
            )
        missing = [i for i in node.get("inputs", []) if i not in nodes]
        if missing:
            raise FlowError(f"node {nid} takes input from missing node(s) {', '.join(missing)}")
        if node["type"] == "document" and not node.get("params", {}).get("object_id"):
            raise FlowError(f"node {nid}: a document node needs params.object_id")
    return topological_order(nodes)


def topological_order(nodes: Nodes) -> list[str]:
    """Kahn's algorithm, ties broken by node id so every worker gets the same order."""
    indegree = {nid: len(set(n.get("inputs", []))) for nid, n in nodes.items()}
    children = _children(nodes)
    ready = sorted(nid for nid, d in indegree.items() if d == 0)
    order: list[str] = []
    while ready:
        nid = ready.pop(0)
        order.append(nid)
        for child in children[nid]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
        ready.sort()
    if len(order) != len(nodes):
        cycle = sorted(set(nodes) - set(order))
        raise FlowError(f"the flow has a cycle through {', '.join(cycle[:10])}")
    return order


def _children(edges: Mapping[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {nid: [] for nid in edges}
    for nid, node in edges.items():
        inputs = node.get("inputs", []) if isinstance(node, Mapping) else node
        for i in dict.fromkeys(inputs):
            out[i].append(nid)
    return out


def descendants(edges: Mapping[str, list[str]], roots: Iterable[str]) -> set[str]:
    """Every node downstream of `roots` (not the roots themselves); edges: node → inputs."""
    children = _children(edges)
    seen: set[str] = set()
    todo = [c for r in roots for c in children.get(r, [])]
    while todo:
        nid = todo.pop()
        if nid not in seen:
            seen.add(nid)
            todo.extend(children.get(nid, []))
    return seen


def ready_nodes(
    edges: Mapping[str, list[str]], order: list[str], done: set[str], started: set[str]
) -> list[str]:
    """Nodes not started whose inputs are all done, in `order`."""
    return [
        nid
        for nid in order
        if nid in edges and nid not in started and all(i in done for i in edges[nid])
    ]


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def node_hash(node: Node, input_hashes: list[str], leaf: str = "") -> str:
    """The content hash of one node: type, params, its inputs' result hashes (in order)
    and, for a leaf that reads outside the flow, that content's digest."""
    return digest(
        {
            "type": node.get("type"),
            "params": node.get("params", {}),
            "inputs": input_hashes,
            "leaf": leaf,
        }
    )


def node_hashes(nodes: Nodes, leaf_digests: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for nid in topological_order(nodes):
        node = nodes[nid]
        out[nid] = node_hash(
            node, [out[i] for i in node.get("inputs", [])], leaf_digests.get(nid, "")
        )
    return out


@dataclass
class PricePlan:
    """What a run must do: nodes to execute (hash not in the result cache) and their total;
    the rest reuse their stored result at no cost."""

    hashes: dict[str, str]
    must_run: list[str]
    reuse: list[str]
    prices: dict[str, int] = field(default_factory=dict)

    @property
    def total_cents(self) -> int:
        return sum(self.prices.values())


def price_plan(
    nodes: Nodes,
    leaf_digests: Mapping[str, str],
    cached: Callable[[str, str], bool],
    price: Callable[[str, Node], int],
) -> PricePlan:
    """`cached(node_id, hash)`: a result is stored; `price(node_id, node)`: its quote."""
    hashes = node_hashes(nodes, leaf_digests)
    plan = PricePlan(hashes, [], [])
    for nid in topological_order(nodes):
        if cached(nid, hashes[nid]):
            plan.reuse.append(nid)
        else:
            plan.must_run.append(nid)
            plan.prices[nid] = price(nid, nodes[nid]) if nodes[nid]["type"] in PAID else 0
    return plan


def edges_of(nodes: Nodes) -> dict[str, list[str]]:
    return {nid: list(n.get("inputs", [])) for nid, n in nodes.items()}


def call_key(run_id: str, node_id: str, attempt: int) -> str:
    """The business key of a node's paid call: one order per run, node and attempt (a node
    runs at most once per attempt; a resume is a new attempt, a retried activity is not).
    No content hash in it: the run's price card approves these keys, and the person's
    edit of a node before it starts changes what it makes, not whether it was approved
    (a price above the approved amount still asks)."""
    return f"flow:{run_id}:{node_id}:{attempt}"


def run_of_call(call_id: str) -> str | None:
    """The run id of a flow node's call key, or None for a task's own call."""
    if not call_id.startswith("flow:"):
        return None
    return call_id.split(":")[1]

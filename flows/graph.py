"""A flow as a dependency graph, as pure functions (no DB, no clock): validation, order,
readiness, descendants, content hashes and the pricing plan.

A node's hash covers its type, its params and, in order, the hashes of its inputs (a
Merkle chain), so a result stored under a hash is valid for exactly that node definition
fed by exactly those inputs: change one shot's prompt and its hash, and every hash below
it, changes; nothing else does. Leaf inputs that are not nodes (a document node's current
text) enter through `leaf_digests`.

A node fed by a document node does not hash the whole document: it hashes only the parts
of it that it uses (flows/uses.py: the entities its params name), so changing one
character's description changes the hashes of exactly the nodes that name that character
and of what is built on them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flows.errors import FlowError, FlowTooLargeToRun
from flows.uses import used_of
from lomo.limits import MAX_FLOW_NODES

Node = Mapping[str, Any]
Nodes = Mapping[str, Node]
# Document node id → the document's current content (None: it is missing or deleted).
Documents = Mapping[str, Mapping[str, Any] | None]

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


def input_uses(node: Node, hashes: Mapping[str, str], documents: Documents) -> dict[str, Any]:
    """What the node takes from each input: a node input's result hash, or the used parts of
    a document input (uses.used_of). Its digests enter the node's hash; kept with the node's
    row, it tells a later run what changed."""
    params = node.get("params", {})
    return {
        i: used_of(params, documents[i]) if i in documents else {"hash": hashes.get(i, "")}
        for i in node.get("inputs", [])
    }


def use_digests(uses: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """`input_uses` with each text replaced by its digest: small enough to store per node."""
    out: dict[str, Any] = {}
    for i, use in uses.items():
        if "parts" in use:
            out[i] = {
                "parts": {k: digest(v) if v is not None else None for k, v in use["parts"].items()}
            }
        elif "whole" in use:
            out[i] = {"whole": digest(use["whole"])}
        else:
            out[i] = dict(use)
    return out


def narrowed_hash(
    node: Node, hashes: Mapping[str, str], documents: Documents, leaf: str = ""
) -> tuple[str, dict[str, Any]]:
    """The node's hash over what it uses of its inputs, and that use as stored (its basis):
    `self` digests the node's own definition, `inputs` what it takes from each input."""
    uses = use_digests(input_uses(node, hashes, documents))
    # Only a narrowed use replaces the input's hash: a node that uses a whole document
    # keeps the hash it always had, so its stored results stay valid.
    inputs = [
        digest(uses[i]) if "parts" in uses[i] else hashes.get(i, "") for i in node.get("inputs", [])
    ]
    basis = {
        "self": digest({k: node.get(k) for k in ("type", "params", "inputs")}),
        "inputs": uses,
    }
    return node_hash(node, inputs, leaf), basis


def node_hashes(
    nodes: Nodes, leaf_digests: Mapping[str, str], documents: Documents | None = None
) -> dict[str, str]:
    return node_bases(nodes, leaf_digests, documents or {})[0]


def node_bases(
    nodes: Nodes, leaf_digests: Mapping[str, str], documents: Documents
) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Every node's hash and basis, inputs first. A document input absent from `documents`
    enters by its hash, whole (its content unknown here)."""
    hashes: dict[str, str] = {}
    bases: dict[str, dict[str, Any]] = {}
    for nid in topological_order(nodes):
        hashes[nid], bases[nid] = narrowed_hash(
            nodes[nid], hashes, documents, leaf_digests.get(nid, "")
        )
    return hashes, bases


@dataclass
class PricePlan:
    """What a run must do: nodes to execute (hash not in the result cache) and their total;
    the rest reuse their stored result at no cost."""

    hashes: dict[str, str]
    must_run: list[str]
    reuse: list[str]
    prices: dict[str, int] = field(default_factory=dict)
    bases: dict[str, dict[str, Any]] = field(default_factory=dict)  # see narrowed_hash

    @property
    def total_cents(self) -> int:
        return sum(self.prices.values())


def price_plan(
    nodes: Nodes,
    leaf_digests: Mapping[str, str],
    cached: Callable[[str, str], bool],
    price: Callable[[str, Node], int],
    documents: Documents | None = None,
) -> PricePlan:
    """`cached(node_id, hash)`: a result is stored; `price(node_id, node)`: its quote;
    `documents`: the content of each document node, so its consumers hash what they use."""
    hashes, bases = node_bases(nodes, leaf_digests, documents or {})
    plan = PricePlan(hashes, [], [], bases=bases)
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

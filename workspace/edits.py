"""The merge rules of the workspace, as pure functions (no DB): content validation,
exact-unique snippet edits for documents, node-level merges for flows.

Kept free of I/O so the property tests can drive them directly.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lomo.errors import FlowTooLarge, InvalidInput
from lomo.limits import MAX_FLOW_NODES
from workspace.errors import EditRefused, NodeConflict

Node = dict[str, Any]

# --- content -------------------------------------------------------------------------


def validate_content(type_: str, content: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical content of an object of `type_`; InvalidInput if it is malformed."""
    if type_ == "document":
        # {"text": "..."} plus any metadata; a document without text is an empty one.
        if not isinstance(content.get("text", ""), str):
            raise InvalidInput('a document\'s "text" must be a string')
        return dict(content)
    if type_ == "flow":
        nodes = content.get("nodes")
        if not isinstance(nodes, dict):
            raise InvalidInput('a flow needs {"nodes": {node_id: {"type", "params", "inputs"}}}')
        check_size(nodes)
        clean = {str(k): validate_node(str(k), v) for k, v in nodes.items()}
        check_inputs(clean)
        return {**content, "nodes": clean}
    return dict(content)


def check_size(nodes: Mapping[str, Any]) -> None:
    """A flow's run must fit in one workflow history (lomo/limits.py)."""
    if len(nodes) > MAX_FLOW_NODES:
        raise FlowTooLarge(
            f"a flow has at most {MAX_FLOW_NODES} nodes, this one {len(nodes)}; "
            "split it into several flows",
            limit_nodes=MAX_FLOW_NODES,
        )


def validate_node(node_id: str, node: Any) -> Node:
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise InvalidInput(f"node {node_id} needs a string 'type'")
    params = node.get("params", {})
    inputs = node.get("inputs", [])
    if not isinstance(params, dict):
        raise InvalidInput(f"node {node_id}: 'params' must be an object")
    if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
        raise InvalidInput(f"node {node_id}: 'inputs' must be a list of node ids")
    return {**node, "type": node["type"], "params": params, "inputs": inputs}


def dangling_inputs(nodes: Mapping[str, Node]) -> dict[str, list[str]]:
    """node id -> the inputs it names that are not nodes of the flow."""
    out = {nid: [i for i in n["inputs"] if i not in nodes] for nid, n in nodes.items()}
    return {nid: missing for nid, missing in out.items() if missing}


def check_inputs(nodes: Mapping[str, Node]) -> None:
    for nid, missing in dangling_inputs(nodes).items():
        raise InvalidInput(f"node {nid} takes input from missing node(s) {', '.join(missing)}")


# --- documents -----------------------------------------------------------------------


@dataclass(frozen=True)
class SnippetEdit:
    old: str
    new: str


def parse_edits(raw: Sequence[Mapping[str, Any]]) -> list[SnippetEdit]:
    if not raw:
        raise InvalidInput("edits must name at least one {old, new} pair")
    out = []
    for e in raw:
        old, new = e.get("old"), e.get("new")
        if not isinstance(old, str) or not isinstance(new, str):
            raise InvalidInput("each edit needs string 'old' and 'new'")
        out.append(SnippetEdit(old, new))
    return out


def apply_snippet_edits(text: str, edits: Sequence[SnippetEdit]) -> str:
    """Replace each `old` by its `new`, all-or-nothing.

    Every `old` is located in the text as given (not in the result of earlier edits): it
    must be non-empty, occur exactly once, and not overlap another edit's snippet.
    Otherwise EditRefused names every problem and the text is unchanged.
    """
    problems: list[str] = []
    spans: list[tuple[int, int, str]] = []
    for i, e in enumerate(edits):
        if not e.old:
            problems.append(f"edit {i + 1}: 'old' is empty")
            continue
        count = _count(text, e.old)
        if count != 1:
            where = "not found" if count == 0 else f"found {count} times"
            problems.append(f"edit {i + 1}: snippet {_short(e.old)} {where}")
            continue
        start = text.index(e.old)
        spans.append((start, start + len(e.old), e.new))
    spans.sort()
    for (_, end_a, _), (start_b, _, _) in itertools.pairwise(spans):
        if start_b < end_a:
            problems.append("two edits overlap in the text")
            break
    if problems:
        raise EditRefused("; ".join(problems), problems=problems)
    out, pos = [], 0
    for start, end, new in spans:
        out += [text[pos:start], new]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _count(text: str, snippet: str) -> int:
    """Occurrences including overlapping ones ("aa" occurs twice in "aaa": not unique)."""
    n, i = 0, text.find(snippet)
    while i != -1:
        n += 1
        i = text.find(snippet, i + 1)
    return n


def _short(s: str, limit: int = 60) -> str:
    return repr(s if len(s) <= limit else s[: limit - 1] + "…")


# --- flows ---------------------------------------------------------------------------


@dataclass
class FlowMerge:
    nodes: dict[str, Node]  # the merged flow
    others_changed: list[str]  # nodes changed by someone else since the base version


def changed_nodes(before: Mapping[str, Node], after: Mapping[str, Node]) -> set[str]:
    """Node ids added, removed or changed between two versions of a flow."""
    return {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}


def merge_flow(
    base: Mapping[str, Node], current: Mapping[str, Node], changes: Mapping[str, Node | None]
) -> FlowMerge:
    """Apply node-level `changes` (None deletes) made against `base` onto `current`.

    Refused (Conflict naming the nodes) only if a node named in `changes` changed between
    base and current; any other concurrent change is kept and reported in `others_changed`.
    """
    if not changes:
        raise InvalidInput("nodes must name at least one node")
    moved = changed_nodes(base, current)
    clash = sorted(set(changes) & moved)
    if clash:
        raise NodeConflict(
            f"node(s) {', '.join(clash)} changed since the base version", nodes=clash
        )
    merged = {k: dict(v) for k, v in current.items()}
    for nid, node in changes.items():
        if node is None:
            if nid not in merged:
                raise InvalidInput(f"cannot delete node {nid}: it does not exist")
            del merged[nid]
        else:
            merged[nid] = validate_node(nid, node)
    dangling = dangling_inputs(merged)
    if dangling:
        gone = sorted({i for missing in dangling.values() for i in missing})
        if set(gone) & moved:  # someone else removed a node this change builds on
            raise NodeConflict(
                f"node(s) {', '.join(gone)} were removed since the base version", nodes=gone
            )
        check_inputs(merged)
    check_size(merged)
    return FlowMerge(merged, sorted(moved - set(changes)))

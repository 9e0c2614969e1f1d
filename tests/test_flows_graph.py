"""The flow room's pure rules: validation, order, readiness, content hashes and the
pricing plan (property: an edit changes exactly the hashes of the node and everything
downstream of it)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flows.errors import FlowError
from flows.graph import (
    call_key,
    descendants,
    edges_of,
    node_hashes,
    price_plan,
    ready_nodes,
    run_of_call,
    topological_order,
    validate_graph,
)


def node(type_: str = "image", inputs: list[str] | None = None, **params: Any) -> dict[str, Any]:
    return {"type": type_, "params": {"prompt": "p", **params}, "inputs": inputs or []}


def random_dag(rng: random.Random, n: int) -> dict[str, dict[str, Any]]:
    nodes = {}
    for i in range(n):
        ins = [f"n{j}" for j in range(i) if rng.random() < 0.3]
        nodes[f"n{i}"] = node("video" if ins else "image", ins, seed=i)
    return nodes


def test_validation_names_what_is_wrong() -> None:
    with pytest.raises(FlowError, match="cycle"):
        validate_graph({"a": node(inputs=["b"]), "b": node(inputs=["a"])})
    with pytest.raises(FlowError, match="missing"):
        validate_graph({"a": node(inputs=["x"])})
    with pytest.raises(FlowError, match="type"):
        validate_graph({"a": node("poem")})
    with pytest.raises(FlowError, match="object_id"):
        validate_graph({"a": {"type": "document", "params": {}, "inputs": []}})
    with pytest.raises(FlowError, match="node id"):
        validate_graph({"a b": node()})
    assert validate_graph({"b": node(inputs=["a"]), "a": node()}) == ["a", "b"]


def test_readiness_follows_inputs() -> None:
    nodes = {"a": node(), "b": node(), "c": node("edit", ["a", "b"])}
    edges, order = edges_of(nodes), topological_order(nodes)
    assert ready_nodes(edges, order, set(), set()) == ["a", "b"]
    assert ready_nodes(edges, order, {"a"}, {"a", "b"}) == []
    assert ready_nodes(edges, order, {"a", "b"}, {"a", "b"}) == ["c"]
    assert descendants(edges, ["a"]) == {"c"}


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=40), st.integers(min_value=0, max_value=10**6))
def test_an_edit_changes_exactly_the_node_and_its_descendants(n: int, seed: int) -> None:
    rng = random.Random(seed)
    nodes = random_dag(rng, n)
    before = node_hashes(nodes, {})
    target = f"n{rng.randrange(n)}"
    edited = {**nodes, target: {**nodes[target], "params": {"prompt": "changed"}}}
    after = node_hashes(edited, {})
    changed = {k for k in nodes if before[k] != after[k]}
    assert changed == {target} | descendants(edges_of(nodes), [target])


def test_leaf_digest_and_input_order_enter_the_hash() -> None:
    nodes = {
        "doc": {"type": "document", "params": {"object_id": "obj_1"}, "inputs": []},
        "a": node(inputs=["doc"]),
    }
    assert node_hashes(nodes, {"doc": "v1"})["a"] != node_hashes(nodes, {"doc": "v2"})["a"]
    cut = {"x": node(), "y": node(seed=2), "e": node("edit", ["x", "y"])}
    swapped = {**cut, "e": node("edit", ["y", "x"])}
    assert node_hashes(cut, {})["e"] != node_hashes(swapped, {})["e"]


def test_price_plan_prices_only_what_must_run() -> None:
    nodes = {"a": node(), "b": node("video", ["a"]), "c": node("audio")}
    hashes = node_hashes(nodes, {})
    plan = price_plan(nodes, {}, lambda n, h: n == "a" and h == hashes["a"], lambda n, _: 10)
    assert plan.reuse == ["a"] and sorted(plan.must_run) == ["b", "c"]
    assert plan.total_cents == 20


def test_call_keys_name_their_run() -> None:
    key = call_key("frn_x", "shot1", 2)
    assert key == "flow:frn_x:shot1:2" and len(key) <= 120
    assert run_of_call(key) == "frn_x" and run_of_call("tsk_1:1:1:0") is None

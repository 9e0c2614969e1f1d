"""Property tests of the workspace's merge rules (pure functions, no DB)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lomo.errors import InvalidInput
from workspace.diff import document_change, flow_change
from workspace.edits import (
    SnippetEdit,
    apply_snippet_edits,
    changed_nodes,
    merge_flow,
    validate_content,
)
from workspace.errors import EditRefused, NodeConflict

ALPHABET = "ab \n#"
texts = st.text(alphabet=ALPHABET, max_size=40)


def occurrences(text: str, snippet: str) -> int:
    return sum(1 for i in range(len(text)) if text.startswith(snippet, i))


# --- snippet edits -------------------------------------------------------------------


@given(texts, st.lists(st.tuples(texts, texts), min_size=1, max_size=4))
@settings(max_examples=400)
def test_snippet_edits_apply_all_or_nothing(text: str, pairs: list[tuple[str, str]]) -> None:
    edits = [SnippetEdit(o, n) for o, n in pairs]
    unique = all(e.old and occurrences(text, e.old) == 1 for e in edits)
    spans = sorted((text.find(e.old), text.find(e.old) + len(e.old)) for e in edits if e.old)
    disjoint = all(b[0] >= a[1] for a, b in itertools.pairwise(spans))
    try:
        out = apply_snippet_edits(text, edits)
    except EditRefused as refusal:
        # Refused exactly when some snippet is empty, missing, repeated or overlapping.
        assert not (unique and disjoint)
        assert refusal.extra["problems"]
        return
    assert unique and disjoint
    # The result is the text with each span replaced: rebuild it independently.
    expected, pos = "", 0
    for e in sorted(edits, key=lambda e: text.find(e.old)):
        start = text.find(e.old)
        expected += text[pos:start] + e.new
        pos = start + len(e.old)
    assert out == expected + text[pos:]


@given(st.text(max_size=30), st.text(min_size=1, max_size=10), st.text(max_size=10))
def test_a_unique_snippet_is_replaced_and_the_rest_kept(
    prefix: str, snippet: str, new: str
) -> None:
    marker = "\x00" + snippet + "\x00"  # NUL occurs nowhere else: unique by construction
    assume("\x00" not in prefix + snippet + new)
    text = prefix + marker + prefix
    out = apply_snippet_edits(text, [SnippetEdit(marker, new)])
    assert out == prefix + new + prefix


@given(texts, texts)
def test_a_repeated_snippet_is_refused(text: str, snippet: str) -> None:
    assume(snippet)
    doubled = text + snippet + text + snippet
    with pytest.raises(EditRefused):
        apply_snippet_edits(doubled, [SnippetEdit(snippet, "x")])


def test_snippet_refusal_names_each_problem() -> None:
    with pytest.raises(EditRefused) as e:
        apply_snippet_edits(
            "shot 1: cat\nshot 2: cat", [SnippetEdit("cat", "dog"), SnippetEdit("zebra", "x")]
        )
    problems = e.value.extra["problems"]
    assert "found 2 times" in problems[0] and "not found" in problems[1]


# --- flow merges ---------------------------------------------------------------------

Flow = dict[str, dict[str, Any]]
Changes = dict[str, dict[str, Any] | None]
node_ids = st.sampled_from(["n1", "n2", "n3", "n4", "n5"])
nodes_st = st.builds(
    lambda t, p: {"type": t, "params": {"p": p}, "inputs": []},
    st.sampled_from(["image", "video", "prompt"]),
    st.integers(0, 3),
)
flows = st.dictionaries(node_ids, nodes_st, max_size=5)
changes_st = st.dictionaries(node_ids, st.one_of(st.none(), nodes_st), min_size=1, max_size=3)


@given(flows, changes_st, changes_st)
@settings(max_examples=400)
def test_flow_merge_rule(base: Flow, theirs: Changes, mine: Changes) -> None:
    # Someone else applied `theirs` to base (deleting only nodes that exist).
    current = {k: v for k, v in base.items()}
    for nid, node in theirs.items():
        if node is None:
            current.pop(nid, None)
        else:
            current[nid] = node
    moved = changed_nodes(base, current)
    try:
        merged = merge_flow(base, current, mine)
    except NodeConflict as e:
        assert set(e.extra["nodes"]) == set(mine) & moved  # refused only for moved nodes
        assert set(mine) & moved
        return
    except InvalidInput:
        # Deleting a node that does not exist (in the current flow) is refused as invalid.
        assert any(node is None and nid not in current for nid, node in mine.items())
        return
    assert not set(mine) & moved
    for nid in mine:  # every change of mine landed
        assert merged.nodes.get(nid) == mine[nid]
    for nid in moved:  # every concurrent change of theirs is kept
        assert merged.nodes.get(nid) == current.get(nid)
    for nid in set(base) - moved - set(mine):  # untouched nodes unchanged
        assert merged.nodes[nid] == base[nid]
    assert merged.others_changed == sorted(moved)


def test_merge_refuses_a_change_built_on_a_node_removed_meanwhile() -> None:
    base = {"a": {"type": "image", "params": {}, "inputs": []}}
    with pytest.raises(NodeConflict) as e:
        merge_flow(base, {}, {"b": {"type": "video", "params": {}, "inputs": ["a"]}})
    assert e.value.extra["nodes"] == ["a"]


def test_flow_content_is_validated() -> None:
    with pytest.raises(InvalidInput):
        validate_content("flow", {"nodes": {"a": {"params": {}}}})
    with pytest.raises(InvalidInput):
        validate_content("flow", {"nodes": {"a": {"type": "x", "inputs": ["ghost"]}}})
    ok = validate_content("flow", {"nodes": {"a": {"type": "x"}}})
    assert ok["nodes"]["a"] == {"type": "x", "params": {}, "inputs": []}


# --- summaries -----------------------------------------------------------------------

STORYBOARD = "# Storyboard\n## Shot 1\nA cat wakes up.\n## Shot 2\nThe cat looks out.\n"


def test_document_summary_names_the_changed_section() -> None:
    new = STORYBOARD.replace("The cat looks out.", "The cat jumps onto the sill.")
    assert document_change(STORYBOARD, new) == "Shot 2 changed (+1/-1 lines)"


def test_document_summary_without_headings_names_lines_and_stays_short() -> None:
    old = "\n".join(f"line {i}" * 3 for i in range(2000))
    new = "\n".join((f"line {i}" * 3 if i % 100 else "changed") for i in range(2000))
    summary = document_change(old, new)
    assert summary.startswith("lines 1, 101, 201, 301, 401 and 15 more changed")
    assert len(summary) < 120


def test_flow_summary_names_nodes_and_params() -> None:
    old = {"a": {"type": "image", "params": {"prompt": "cat"}, "inputs": []}}
    new = {
        "a": {"type": "image", "params": {"prompt": "dog"}, "inputs": []},
        "b": {"type": "video", "params": {}, "inputs": ["a"]},
    }
    assert flow_change(old, new) == "node(s) a (params.prompt) changed; added b"

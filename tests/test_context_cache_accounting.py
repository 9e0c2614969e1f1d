"""The prompt-cache rules the stand-in applies (as Anthropic's API documents them) and the
checks that guard the stable prefix: each must be able to fail."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from context.prefix import profile_layout
from context.types import Profile
from standin.server import BadRequest, account_cache, check_cache_markup
from tests.context_support import unexplained_prefix_changes

EPH = {"type": "ephemeral"}


def _tool(name: str, size: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "d" * size, "input_schema": {}, **extra}


def _body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "tools": [_tool("core", 4000), _tool("deep", 2000, defer_loading=True)],
        "system": [{"type": "text", "text": "rules " * 200, "cache_control": EPH}],
        "messages": messages,
    }


def _msgs(n: int, refs: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    for i in range(n):
        out.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "core", "input": {}}],
            }
        )
        content: Any = "x" * 400
        if refs and i == 0:
            content = [{"type": "tool_reference", "tool_name": "deep"}]
        out.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": content}],
            }
        )
    out[-1]["content"][-1]["cache_control"] = EPH
    return out


def test_deferred_tools_are_not_in_the_prompt_until_referenced() -> None:
    cache: dict[str, int] = {}
    plain = account_cache(cache, _body(_msgs(1)), 1024)
    loaded = account_cache({}, _body(_msgs(1, refs=True)), 1024)
    total = lambda u: u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens  # noqa: E731
    # The deferred tool (2000 characters of description) counts only where referenced.
    assert total(loaded) - total(plain) > 400
    assert total(plain) < (4000 + 1200 + 600) // 4 + 100


def test_reads_the_longest_written_prefix_within_the_lookback_and_the_minimum() -> None:
    cache: dict[str, int] = {}
    first = account_cache(cache, _body(_msgs(2)), 1024)
    assert first.cache_read_input_tokens == 0 and first.cache_creation_input_tokens > 1024
    second = account_cache(cache, _body(_msgs(3)), 1024)
    # Everything up to the previous request's last breakpoint is read, the step's addition
    # is written.
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert 0 < second.cache_creation_input_tokens < 200
    # A changed byte early in the history: only the system breakpoint's prefix is read.
    changed = _body(_msgs(4))
    changed["messages"][0]["content"][0]["text"] = "stop"
    third = account_cache(cache, changed, 1024)
    assert third.cache_read_input_tokens < second.cache_read_input_tokens
    # Below the minimum nothing is cached at all.
    small = _body(_msgs(1))
    small["tools"][0]["description"] = "d"
    small["system"][0]["text"] = "rules"
    assert account_cache({}, small, 1024).cache_creation_input_tokens == 0


def test_markup_the_api_refuses() -> None:
    body = _body(_msgs(2, refs=True))
    check_cache_markup(body)
    five = copy.deepcopy(body)
    for m in five["messages"][:4]:
        m["content"][0]["cache_control"] = EPH
    with pytest.raises(BadRequest, match="maximum of 4"):
        check_cache_markup(five)
    unknown = copy.deepcopy(body)
    unknown["messages"][2]["content"][0]["content"] = [
        {"type": "tool_reference", "tool_name": "core"}
    ]
    with pytest.raises(BadRequest, match="names no deferred tool"):
        check_cache_markup(unknown)
    marked = copy.deepcopy(body)
    marked["tools"][1]["cache_control"] = EPH
    with pytest.raises(BadRequest, match="defer_loading"):
        check_cache_markup(marked)


def test_the_first_breakpoint_check_fails_on_a_change_without_reason() -> None:
    bodies = [_body(_msgs(i + 1)) for i in range(4)]
    records: list[dict[str, Any]] = [{"changes": []} for _ in bodies]
    assert unexplained_prefix_changes(bodies, records) == []
    bodies[2]["tools"][0]["description"] += "!"  # a byte before the first breakpoint
    assert unexplained_prefix_changes(bodies, records) == [2, 3]
    records[2]["changes"] = ["tool definitions changed (a new worker version)"]
    records[3]["changes"] = ["tool definitions changed (a new worker version)"]
    assert unexplained_prefix_changes(bodies, records) == []
    records[1]["changes"] = ["unexplained"]  # the builder's own record counts too
    assert unexplained_prefix_changes(bodies, records) == [1]
    deferred = copy.deepcopy(bodies)
    deferred[1]["tools"][1]["description"] = "changed"  # what a reference would expand
    assert 1 in unexplained_prefix_changes(deferred, [{"changes": []} for _ in bodies])


def _profile(version: int, *lines: str) -> Profile:
    text = f"Profile of the person (v{version}):\n" + "\n".join(f"- {x}" for x in lines)
    return Profile(text if lines else "", version)


def test_a_profile_addition_is_appended_and_a_correction_rewrites_the_snapshot() -> None:
    first = profile_layout(None, _profile(1, "likes teal"), 0)
    assert "likes teal" in first.base_text and first.notes == []
    prev = {"profile_state": first.state}
    added = profile_layout(prev, _profile(2, "likes teal", "font Futura"), 7)
    assert added.base_text == first.base_text  # the snapshot's bytes stay
    assert [at for at, _ in added.notes] == [7] and "font Futura" in added.notes[0][1]
    assert added.appended and "appended" in added.appended
    # Forgetting or correcting a line: nothing stale may stay, the snapshot is rewritten.
    fixed = profile_layout({"profile_state": added.state}, _profile(3, "font Futura"), 9)
    assert "likes teal" not in fixed.base_text + json.dumps(fixed.notes)
    assert fixed.appended is None and fixed.notes == [] and "Futura" in fixed.base_text

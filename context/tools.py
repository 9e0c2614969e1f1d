"""What a context shows of the tool set: the core tools, every domain's tools deferred, the
domains a task has loaded (docs/architecture.md#context). Pure functions over any mapping
of tools."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from context.types import CallRow, call_order
from llm.types import ToolSpec


class ToolLike(Protocol):
    """What the context reads of a tool (`tools/base.py` `Tool` has it)."""

    spec: ToolSpec
    domain: str

    @property
    def name(self) -> str: ...


# The order domains are offered in (the system text lists them in this order).
DOMAINS = ("image", "video", "audio", "3d", "documents", "flows", "memory", "budget")
PREVIEW_CHARS = 400


def loaded_domains(calls: Iterable[CallRow], tools: Mapping[str, ToolLike]) -> list[str]:
    """The task's loaded domains in the order they were loaded (appending a later domain
    never moves an earlier one): by a `load_tools` call, or by calling one of its tools."""
    order: list[str] = []
    for c in sorted(calls, key=lambda c: call_order(c.call_id)):
        found: list[str] = []
        if c.name == "load_tools" and c.status == "done" and c.result:
            found = [str(d) for d in c.result.get("loaded", [])]
        elif c.name in tools and tools[c.name].domain != "core":
            found = [tools[c.name].domain]
        order.extend(d for d in found if d not in order)
    return order


def request_tools(tools: Mapping[str, ToolLike]) -> list[ToolSpec]:
    """What every step sends: the core tools, then every domain's tools deferred (not in the
    prompt until referenced), so the tools array never changes during a task."""
    core = [t.spec for t in tools.values() if t.domain == "core"]
    extra = [
        ToolSpec(t.spec.name, t.spec.description, t.spec.input_schema, deferred=True)
        for d in domain_index(tools)
        for t in tools.values()
        if t.domain == d
    ]
    return [*core, *extra]


def domain_tool_names(tools: Mapping[str, ToolLike], domain: str) -> list[str]:
    return [t.spec.name for t in tools.values() if t.domain == domain]


def domain_index(tools: Mapping[str, ToolLike]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for t in tools.values():
        if t.domain != "core":
            out.setdefault(t.domain, []).append(t.name)
    return {d: out[d] for d in (*DOMAINS, *sorted(set(out) - set(DOMAINS))) if d in out}


def tools_text(tools: Mapping[str, ToolLike]) -> str:
    """The stable prefix's description of the tool set (no loaded state in it)."""
    core = ", ".join(t.name for t in tools.values() if t.domain == "core")
    domains = "; ".join(f"{d}: {', '.join(n)}" for d, n in domain_index(tools).items())
    return (
        f"Core tools: {core}.\nMore tools by domain, available after load_tools(domain) "
        f"(they appear from the next step on): {domains}."
    )

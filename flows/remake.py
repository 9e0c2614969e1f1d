"""Why a run re-makes a node, and the price card that says so, as pure functions.

Each node's row keeps its basis (graph.narrowed_hash): a digest of its own definition and
of what it took from each input. Comparing the basis of the node's last result with the
basis it has now names the cause: the node itself was edited, a part of a document it uses
changed (which character, which attribute), a whole document it reads changed, or an input
it builds on is re-made. The card groups nodes by cause, so the person reads "shot2 and
shot4 show Mara, whose description changed" above the total, and the rest are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flows.graph import PricePlan
from flows.uses import Ref, changed_parts
from lomo.words import euros, say

Basis = Mapping[str, Any]


@dataclass
class Why:
    """The causes of one node's re-make; none of them set: its last result is out of date
    for another reason (stale, or made on a definition since undone)."""

    new: bool = False
    edited: bool = False
    parts: list[Ref] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        return {
            "new": self.new,
            "edited": self.edited,
            "parts": [r.label for r in self.parts],
            "documents": self.documents,
            "inputs": self.inputs,
        }


def why(before: Basis | None, now: Basis, remade: set[str]) -> Why:
    """Compare the basis of a node's last result with its basis now; `remade`: the nodes
    this run makes again (an input among them is a cause even before its hash is known)."""
    if not before:
        return Why(new=True)
    out = Why(edited=before.get("self") != now.get("self"))
    old_inputs, new_inputs = before.get("inputs") or {}, now.get("inputs") or {}
    for i, use in new_inputs.items():
        old = old_inputs.get(i)
        if "hash" in use:
            if i in remade or old != use:
                out.inputs.append(i)
            continue
        if old == use:
            continue
        parts = changed_parts(old or {}, use)
        if parts is None:
            out.documents.append(i)
        else:
            out.parts.extend(p for p in parts if p not in out.parts)
    return out


def reasons(plan: PricePlan, before: Mapping[str, Basis], paid: set[str]) -> dict[str, Why]:
    """Why each paid node the plan must run is re-made (free nodes cost nothing to redo)."""
    remade = set(plan.must_run)
    return {
        nid: why(before.get(nid), plan.bases.get(nid, {}), remade)
        for nid in plan.must_run
        if nid in paid
    }


def card_lines(whys: Mapping[str, Why], language: str | None) -> list[str]:
    """One sentence per cause, naming the nodes it touches, in the plan's order."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for nid, w in whys.items():
        for cause in _causes(w, language):
            groups.setdefault(cause, []).append(nid)
    lines = []
    for (key, name, detail), nodes in groups.items():
        number = "one" if len(nodes) == 1 else "many"
        values = {"nodes": _join(nodes, language), "name": name, "detail": detail}
        lines.append(say(f"flow.why.{key}.{number}", language, **values))
    return lines


def _causes(w: Why, language: str | None) -> list[tuple[str, str, str]]:
    if w.new:
        return [("new", "", "")]
    out: list[tuple[str, str, str]] = []
    if w.edited:
        out.append(("edited", "", ""))
    changed: dict[str, list[str]] = {}
    for ref in w.parts:
        changed.setdefault(ref.name, []).append(ref.attribute or say("flow.why.entry", language))
    out.extend(("part", name, _join(attrs, language)) for name, attrs in changed.items())
    out.extend(("document", doc, "") for doc in w.documents)
    if w.inputs:
        out.append(("input", "", _join(w.inputs, language)))
    return out or [("stale", "", "")]


def _join(items: list[str], language: str | None) -> str:
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {say('flow.and', language)} {items[-1]}"


def remakes_anything(whys: Mapping[str, Why]) -> bool:
    """Some node had a result before: the card explains the re-make, not a first run."""
    return any(not w.new for w in whys.values())


def price_card(
    plan: PricePlan, whys: Mapping[str, Why], paid: set[str], language: str | None
) -> tuple[str, dict[str, Any]]:
    """The price card's title and its payload's re-make list: which paid nodes are made
    again and why, each with its price, and which are kept."""
    calls = [n for n in plan.must_run if plan.prices.get(n)]
    amount = euros(plan.total_cents, language)
    kept = [n for n in plan.reuse if n in paid]
    if not remakes_anything(whys):
        return say("flow.price", language, nodes=len(calls), amount=amount), {"kept": kept}
    head = say(
        "flow.remake",
        language,
        count=len(whys),
        total=len(whys) + len(kept),
        amount=amount,
        kept=len(kept),
    )
    title = " ".join([head, *card_lines(whys, language)])
    remake = [
        {"node": n, "price_cents": plan.prices.get(n, 0), "why": w.payload()}
        for n, w in whys.items()
    ]
    return title, {"remake": remake, "kept": kept}

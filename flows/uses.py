"""What a node uses of a document it takes as input, as pure functions.

A document is read as named parts: each Markdown heading starts an entity named by the
heading (a character, a place, a prop), and `key: value` lines under it are the entity's
attributes (other lines are its `text`). A heading with lower headings under it names a
group ("# Characters" over "## Mara"): naming the group uses all of its members. A document
may also carry entities structured, as `content["entities"] = {name: {attribute: value}}`.
Text before the first heading belongs to no entity.

A node narrows its use of a document to the entities its own params name: explicitly, as
`params.uses = ["Mara", "Tom.voice"]` (a whole entity, or one attribute of it), or else by
mentioning an entity's name in any of its params' text (a shot whose prompt says "Mara on
the cliffs" uses all of Mara). A node that names none of a document's entities depends on
the whole document, so a change anywhere in it makes the node again, as with any input.

The node's hash then covers only the used parts (graph.node_hashes), and its generation
request carries exactly those parts (`context_of`), so a change to one character re-makes
only the nodes that show that character.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Parts = dict[str, dict[str, str]]  # entity name → attribute → text
USES = "uses"  # the param that names the used parts explicitly
TEXT = "text"  # the attribute of an entity's free lines

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<name>.+?)\s*#*\s*$")
# A short label before a colon; a long sentence with a colon stays free text.
_ATTRIBUTE = re.compile(r"^\s*(?:[-*]\s+)?(?P<key>[^\W\d][\w -]{0,29}?)\s*:\s+(?P<value>.+)$")


@dataclass(frozen=True)
class Ref:
    """One used part: a whole entity (`attribute` None) or one of its attributes."""

    name: str
    attribute: str | None = None

    @property
    def label(self) -> str:
        return self.name if self.attribute is None else f"{self.name}.{self.attribute}"


def document_parts(content: Mapping[str, Any] | None) -> Parts:
    """The named entities of a document's content (see the module docstring)."""
    return _read(content)[0]


def document_groups(content: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """A heading → the entities under its lower headings ("Characters" → Mara, Tom): a
    node that names the group uses all of them."""
    return _read(content)[1]


def _read(content: Mapping[str, Any] | None) -> tuple[Parts, dict[str, list[str]]]:
    if not content:
        return {}, {}
    parts: Parts = {}
    groups: dict[str, list[str]] = {}
    above: list[tuple[int, str]] = []  # the open headings, outermost first
    current: str | None = None
    free: dict[str, list[str]] = {}
    for line in str(content.get("text", "")).splitlines():
        heading = _HEADING.match(line)
        if heading:
            level = len(line.strip()) - len(line.strip().lstrip("#"))
            current = heading["name"].strip()
            above = [(n, name) for n, name in above if n < level]
            for _, group in above:
                groups.setdefault(group, []).append(current)
            above.append((level, current))
            parts.setdefault(current, {})
            continue
        if current is None or not line.strip():
            continue
        attribute = _ATTRIBUTE.match(line)
        if attribute:
            parts[current][attribute["key"].strip().lower()] = attribute["value"].strip()
        else:
            free.setdefault(current, []).append(line.strip())
    for name, lines in free.items():
        parts[name].setdefault(TEXT, " ".join(lines))
    for name, attrs in dict(content.get("entities") or {}).items():
        values = attrs if isinstance(attrs, Mapping) else {TEXT: attrs}
        parts.setdefault(str(name), {}).update({str(k): str(v) for k, v in values.items()})
    return parts, groups


def references(params: Mapping[str, Any], names: Iterable[str]) -> list[Ref] | None:
    """The parts a node's params use: `params.uses` when given, else every entity whose
    name its params mention; None when they name nothing (the whole document is used)."""
    explicit = params.get(USES)
    names = list(names)
    if isinstance(explicit, list):
        refs = {_ref(str(u), names) for u in explicit}
        return sorted(refs, key=lambda r: r.label)
    said = " ".join(_texts({k: v for k, v in params.items() if k != USES}))
    found = [
        Ref(name)
        for name in names
        if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", said, re.IGNORECASE)
    ]
    return sorted(found, key=lambda r: r.label) or None


def used_parts(
    parts: Parts, refs: list[Ref], groups: Mapping[str, list[str]] | None = None
) -> dict[str, str | None]:
    """`name.attribute` → its text, for each used part; None for a part the document
    lacks (so adding it later counts as a change). A whole group stands for its members."""
    out: dict[str, str | None] = {}
    members = [Ref(m) for r in refs if r.attribute is None for m in (groups or {}).get(r.name, [])]
    for ref in [*refs, *members]:
        entity = parts.get(ref.name)
        if ref.attribute is not None:
            out[ref.label] = None if entity is None else entity.get(ref.attribute)
        elif entity is None:
            out[ref.label] = None
        else:
            out.update({f"{ref.name}.{k}": v for k, v in sorted(entity.items())})
    return out


def used_of(params: Mapping[str, Any], content: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a node with these params uses of one document: its used parts, or the whole
    content when it names none of the document's entities."""
    if content is None:
        return {"missing": True}
    parts, groups = _read(content)
    refs = references(params, parts)
    if refs is None:
        return {"whole": dict(content)}
    return {"parts": used_parts(parts, refs, groups)}


def context_of(used: Iterable[Mapping[str, Any]]) -> str:
    """The used parts as lines for a generation request ("Mara, look: a red coat")."""
    lines = []
    for use in used:
        for label, text in (use.get("parts") or {}).items():
            if text:
                name, _, attribute = label.rpartition(".")
                lines.append(
                    f"{name}: {text}" if attribute == TEXT else f"{name}, {attribute}: {text}"
                )
    return "\n".join(lines)


def changed_parts(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[Ref] | None:
    """The used parts that differ between two uses of a document (`used_of` digested);
    None when the use is not narrowed on both sides (a whole document, or a missing one)."""
    if "parts" not in before or "parts" not in now:
        return None
    old, new = before["parts"], now["parts"]
    labels = sorted(set(old) | set(new))
    return [_label_ref(label) for label in labels if old.get(label) != new.get(label)]


def _ref(use: str, names: list[str]) -> Ref:
    """`Mara` or `Mara.look`; a name that itself holds a dot ("Dr. Ruth") stays whole."""
    name, dot, attribute = use.rpartition(".")
    return Ref(name, attribute.strip().lower()) if dot and use not in names else Ref(use)


def _label_ref(label: str) -> Ref:
    # used_parts writes `name.attribute`, or a bare name for an entity the document lacks.
    name, dot, attribute = label.rpartition(".")
    return Ref(name, attribute) if dot else Ref(label)


def _texts(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _texts(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _texts(v)

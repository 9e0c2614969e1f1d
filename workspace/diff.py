"""Short summaries of what changed between two versions of an object.

They go into change notices and refusals, so they stay small whatever the object's size:
documents name the changed sections (or line ranges), flows the changed nodes; long
lists are cut with a count ("and 7 more").
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

from workspace.edits import changed_nodes

MAX_NAMES = 5
# A section starts at a markdown heading or at a numbered label such as "Shot 2:".
_HEADING = re.compile(r"^\s*(#{1,6}\s*\S.*|[^\W\d_]+\s+\d+\s*[:.)\-–].*|[^\W\d_]+\s+\d+\s*)$")


def summarize_change(type_: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    if type_ == "document":
        text = document_change(str(old.get("text", "")), str(new.get("text", "")))
        fields = sorted(
            k for k in old.keys() | new.keys() if k != "text" and old.get(k) != new.get(k)
        )
        if fields:
            extra = f"field(s) {_names(fields)} changed"
            return extra if text == "no change" else f"{text}; {extra}"
        return text
    if type_ == "flow":
        return flow_change(old.get("nodes") or {}, new.get("nodes") or {})
    if old == new:
        return "no change"
    return f"new content ({new.get('media_type', 'unknown type')})"


def _names(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_NAMES])
    return shown + (f" and {len(items) - MAX_NAMES} more" if len(items) > MAX_NAMES else "")


def _section_titles(lines: list[str]) -> list[str | None]:
    """For each line, the title of the section it belongs to (None before any heading)."""
    out: list[str | None] = []
    title: str | None = None
    for line in lines:
        if _HEADING.match(line):
            title = line.strip().lstrip("#").strip()
            title = re.split(r"[:.)\-–]", title, maxsplit=1)[0].strip()[:40] or title[:40]
        out.append(title)
    return out


def document_change(old: str, new: str) -> str:
    if old == new:
        return "no change"
    a, b = old.splitlines(), new.splitlines()
    titles_a, titles_b = _section_titles(a), _section_titles(b)
    sections: list[str] = []
    ranges: list[str] = []
    added = removed = 0
    untitled = False
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        added, removed = added + (j2 - j1), removed + (i2 - i1)
        touched = titles_b[j1:j2] if j2 > j1 else titles_a[i1:i2]
        if j2 == j1 and i1 < len(titles_a):
            touched = titles_a[i1:i2]
        for t in touched:
            if t is None:
                untitled = True
            elif t not in sections:
                sections.append(t)
        lo, hi = (j1 + 1, j2) if j2 > j1 else (j1, j1)
        ranges.append(f"{lo}" if lo >= hi else f"{lo}-{hi}")
    counts = f"+{added}/-{removed} lines"
    if sections:
        extra = " and the part before the first heading" if untitled else ""
        return f"{_names(sections)} changed{extra} ({counts})"
    return f"lines {_names(ranges)} changed ({counts})"


def flow_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    ids = sorted(changed_nodes(old, new))
    if not ids:
        return "no change"
    added = [n for n in ids if n not in old]
    removed = [n for n in ids if n not in new]
    parts = []
    changed = []
    for n in ids:
        if n in old and n in new:
            keys = _changed_keys(old[n], new[n])
            changed.append(f"{n} ({', '.join(keys[:3])})" if keys else n)
    if changed:
        parts.append(f"node(s) {_names(changed)} changed")
    if added:
        parts.append(f"added {_names(added)}")
    if removed:
        parts.append(f"removed {_names(removed)}")
    return "; ".join(parts)


def _changed_keys(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    keys = []
    for k in sorted(a.keys() | b.keys()):
        if a.get(k) == b.get(k):
            continue
        if k == "params" and isinstance(a.get(k), dict) and isinstance(b.get(k), dict):
            pa, pb = a[k], b[k]
            keys += [f"params.{p}" for p in sorted(pa.keys() | pb.keys()) if pa.get(p) != pb.get(p)]
        else:
            keys.append(k)
    return keys


# A diff shown to the person: changed lines with this many unchanged lines around them,
# and no more lines in all than a page can show readably.
CONTEXT_LINES = 3
MAX_DIFF_LINES = 2000


def content_text(type_: str, content: Mapping[str, Any]) -> str:
    """What a version's lines are: a document's text; a flow's nodes as sorted JSON."""
    if type_ == "document":
        return str(content.get("text", ""))
    return json.dumps(content.get("nodes") or {}, indent=2, sort_keys=True, ensure_ascii=False)


def line_diff(
    old: str, new: str, context: int = CONTEXT_LINES, max_lines: int = MAX_DIFF_LINES
) -> dict[str, Any]:
    """The changed lines of `old` -> `new` in hunks, each line with its op ("equal",
    "removed", "added") and its numbers in the old and new text (1-based); the counts
    of added and removed lines are over the whole diff even when the hunks are cut."""
    a, b = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    hunks: list[list[dict[str, Any]]] = []
    added = removed = shown = 0
    truncated = False
    for group in matcher.get_grouped_opcodes(context):
        lines: list[dict[str, Any]] = []
        for tag, i1, i2, j1, j2 in group:
            rows: list[tuple[str, str, int | None, int | None]]
            removed += (i2 - i1) if tag in ("replace", "delete") else 0
            added += (j2 - j1) if tag in ("replace", "insert") else 0
            if tag == "equal":
                rows = [("equal", a[i], i + 1, j1 + i - i1 + 1) for i in range(i1, i2)]
            else:
                rows = [("removed", a[i], i + 1, None) for i in range(i1, i2)]
                rows += [("added", b[j], None, j + 1) for j in range(j1, j2)]
            for op, text, old_no, new_no in rows:
                if shown >= max_lines:
                    truncated = True
                    break
                lines.append({"op": op, "text": text, "old_line": old_no, "new_line": new_no})
                shown += 1
        if lines:
            hunks.append(lines)
    return {"hunks": hunks, "added": added, "removed": removed, "truncated": truncated}

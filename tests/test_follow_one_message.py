"""docs/architecture.md's "Follow one message" names real files and functions, in order.

Each numbered line names `path.py` · `function` or `Class.method`; the file is parsed (not
imported) and the name must be defined there. A rename or a move that leaves the walk-through
behind fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEP = re.compile(r"^\d+\. `([\w/]+\.py)` · `([\w.]+)`", re.MULTILINE)


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def steps() -> list[tuple[str, str]]:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    return STEP.findall(section(doc, "Follow one message"))


def defined(path: Path) -> set[str]:
    """Top-level functions and classes, and `Class.method` for every method."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(f"{node.name}.{item.name}")
    return names


def test_the_walk_through_names_existing_functions() -> None:
    found = steps()
    assert len(found) >= 30, f"the walk-through lost its steps: {len(found)} parsed"
    missing = [
        f"{path} · {name}"
        for path, name in found
        if not (ROOT / path).is_file() or name not in defined(ROOT / path)
    ]
    assert not missing, "named in docs/architecture.md but not defined: " + ", ".join(missing)


def test_the_walk_through_starts_at_the_entry_and_ends_at_the_event_stream() -> None:
    found = steps()
    assert found[0] == ("api/routes/messages.py", "post_message")
    assert found[-1] == ("api/routes/events.py", "stream")


def test_a_renamed_function_is_caught(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("class A:\n    async def b(self) -> None: ...\n\ndef c() -> None: ...\n")
    assert {"A", "A.b", "c"} <= defined(module)
    assert "A.gone" not in defined(module)

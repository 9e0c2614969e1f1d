"""Import direction of the tree: every arrow points down the layers (README, "Layout").

    cli  →  api  →  workflows, activities  →  model stand-ins  →  domain rooms  →  model
    interface, vector index  →  kernel (`lomo`);  the simulator (`sim`) stands apart.

A module may import its own package, anything in a lower layer, and, within a layer, only
the siblings its row names. Every import counts, including those inside functions (a lazy
import is still a dependency). Run: `python tools/check_layers.py [root]`; exits 1 and
names each offending line when an arrow points up or sideways.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

# Package prefix → layer; the longest matching prefix wins, so `llm.standin` (the offline
# model, which reads each room's prompt format) sits above the rooms while `llm` is below.
LAYERS: dict[str, int] = {
    "lomo": 0,
    "llm": 1,
    "vectors": 1,
    "money": 2,
    "routing": 2,
    "memory": 2,
    "workspace": 2,
    "flows": 2,
    "llm.standin": 3,
    "llm.providers": 3,
    "workflows": 4,
    "activities": 4,
    "api": 5,
    "cli": 6,
    "web": 1,  # the static page and its mount: imports nothing of ours
    "sim": 0,
    "scenarios": 6,  # the harness drives the stack over HTTP: kernel and httpx only
}
# Siblings in one layer that may import each other (from → to). Workflows name their
# activities; activities start nothing but may read workflow dataclasses.
SIDEWAYS: set[tuple[str, str]] = {
    ("workflows", "activities"),
    ("activities", "workflows"),
    ("llm.providers", "llm.standin"),
}
# The simulator is a separate vendor stand-in: it and the kernel may only use each other
# in the directions listed; only the CLI (which starts it) imports it.
APART: dict[str, set[str]] = {"sim": {"lomo"}, "scenarios": {"lomo"}}
PACKAGES = sorted(LAYERS, key=len, reverse=True)


@dataclass(frozen=True)
class Violation:
    path: Path
    line: int
    importer: str
    imported: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.importer} imports {self.imported} ({self.why})"


def room(module: str) -> str | None:
    for p in PACKAGES:
        if module == p or module.startswith(p + "."):
            return p
    return None


def _top(module: str) -> str:
    return module.split(".", 1)[0]


def _imports(tree: ast.AST, module: str, is_pkg: bool) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing module
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            out.append((node.lineno, name))
            # `from llm import standin` imports the submodule `llm.standin`.
            out.extend((node.lineno, f"{name}.{a.name}") for a in node.names)
    return out


def check(root: Path) -> list[Violation]:
    found: list[Violation] = []
    for top in sorted({_top(p) for p in LAYERS}):
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            is_pkg = parts[-1] == "__init__"
            module = ".".join(parts[:-1] if is_pkg else parts)
            src = room(module)
            if src is None:
                continue
            for line, name in _imports(ast.parse(path.read_text()), module, is_pkg):
                dst = room(name)
                if dst is None or dst == src:
                    continue
                why = _refusal(src, dst)
                if why:
                    found.append(Violation(path.relative_to(root), line, module, name, why))
    # `from x import y` adds both x and x.y: report a line once.
    unique = {(v.path, v.line, _top(v.imported)): v for v in found}
    return sorted(unique.values(), key=lambda v: (str(v.path), v.line))


def _refusal(src: str, dst: str) -> str | None:
    if src in APART:
        return None if dst in APART[src] else f"{src} stands apart"
    if dst in APART:
        return None if src == "cli" else f"only the CLI starts {dst}"
    if LAYERS[dst] < LAYERS[src] or (src, dst) in SIDEWAYS:
        return None
    if LAYERS[dst] == LAYERS[src]:
        return f"{src} and {dst} are siblings in layer {LAYERS[src]}"
    return f"upward: layer {LAYERS[src]} → {LAYERS[dst]}"


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    bad = check(root)
    for v in bad:
        print(v)
    if bad:
        print(f"{len(bad)} import(s) against the layers (tools/check_layers.py)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Where a process's CPU went, by package, from py-spy's raw (collapsed-stack) output.

    .venv/bin/python bench/flame_summary.py bench/out/worker-pictures.txt [more files]

py-spy `record --format raw --full-filenames` writes one line per distinct stack:
`frame;frame;...;frame <samples>`, each frame `function (path:line)`, root first. Without
`--idle` only samples of threads that were running are kept, so the samples stand for CPU.
Each frame's package is taken from its path: the name after `site-packages/`, a project
package (the first folder under the repository), or the standard library's module.

- *self*: the samples whose innermost frame is in the package (where the CPU was spent);
- *inclusive*: the samples with the package anywhere on the stack (what it caused, e.g.
  everything the stand-in model ran, including the libraries it called).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_FRAME = re.compile(r"^(?P<func>.*) \((?P<path>[^()]*):\d+\)$")
_STDLIB = re.compile(r"/lib/python3\.\d+/(?P<mod>[^/]+)")
# The offline model and its callers' name for it in the tables.
MODEL = "standin"


def package_of(frame: str, root: Path = ROOT) -> str:
    """The package a py-spy frame belongs to ("<other>" when its path says nothing)."""
    m = _FRAME.match(frame.strip())
    if not m:
        return "<other>"
    path = m["path"]
    if "/site-packages/" in path:
        top = path.split("/site-packages/", 1)[1].split("/", 1)[0]
        return top.removesuffix(".py")
    project = str(root) + "/"
    if path.startswith(project):
        return path[len(project) :].split("/", 1)[0].removesuffix(".py")
    if s := _STDLIB.search(path):
        return s["mod"].removesuffix(".py")
    return "<other>"


@dataclass
class Summary:
    samples: int = 0
    own: Counter[str] = field(default_factory=Counter)
    inclusive: Counter[str] = field(default_factory=Counter)

    def share(self, package: str) -> float:
        """The inclusive share of samples with `package` on the stack (0 without samples)."""
        return self.inclusive[package] / self.samples if self.samples else 0.0


def summarise(lines: Iterable[str], root: Path = ROOT) -> Summary:
    out = Summary()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        packages = [package_of(f, root) for f in stack.split(";")]
        out.samples += n
        out.own[packages[-1]] += n
        for p in set(packages):
            out.inclusive[p] += n
    return out


def table(s: Summary, top: int = 12) -> str:
    rows = ["| package | self % | inclusive % |", "|---|---|---|"]
    for pkg, n in s.own.most_common(top):
        rows.append(f"| {pkg} | {100 * n / s.samples:.1f} | {100 * s.share(pkg):.1f} |")
    if MODEL not in dict(s.own.most_common(top)) and s.inclusive[MODEL]:
        own = 100 * s.own[MODEL] / s.samples
        rows.append(f"| {MODEL} | {own:.1f} | {100 * s.share(MODEL):.1f} |")
    rows.append(f"\n{s.samples} samples on CPU")
    return "\n".join(rows)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"\n{name}\n")
        with open(name) as f:
            print(table(summarise(f)))

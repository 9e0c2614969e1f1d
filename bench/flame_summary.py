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

py-spy counts a thread as running when the OS says it is runnable, and it does not see
below a Python frame without `--native`. On a loaded machine (and with `--nonblocking`)
threads blocked in a queue's or a pool's wait still show up. A sample whose innermost frame
is a line that blocks (`tx.get()` in aiosqlite's thread, a thread pool's idle
`work_queue.get`, a lock or condition wait) is therefore counted as *waiting* and left out
of the shares. A sample whose innermost Python frame is the event loop's
`run_until_complete` is native work below it: uvloop's own I/O handling, calls into
Temporal's core and its waits in epoll together, which py-spy cannot tell apart; those are
counted on their own and left out of the shares too. The shares are thus of the samples
in Python code (and the C functions it calls).
"""

from __future__ import annotations

import linecache
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
WAITING, LOOP = "<waiting>", "<event loop, native>"
# Source lines that block their thread: a sample ending on one is a wait, not CPU.
BLOCKING = ("tx.get()", "work_queue.get(block=True)", ".acquire(", ".wait(", "time.sleep(")


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


def leaf_kind(frame: str) -> str | None:
    """WAITING or LOOP for an innermost frame that is not Python code running, else None."""
    m = _FRAME.match(frame.strip())
    if not m:
        return WAITING if not frame.strip() else None  # a thread with no Python frame
    line = linecache.getline(m["path"], int(frame.rsplit(":", 1)[1].rstrip(")")))
    if any(b in line for b in BLOCKING):
        return WAITING
    return LOOP if "run_until_complete(" in line else None


@dataclass
class Summary:
    samples: int = 0  # in Python code: neither waiting nor in the native event loop
    waiting: int = 0
    loop: int = 0
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
        frames = stack.split(";")
        kind = leaf_kind(frames[-1])
        if kind == WAITING:
            out.waiting += n
            continue
        if kind == LOOP:
            out.loop += n
            continue
        packages = [package_of(f, root) for f in frames]
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
    rows.append(
        f"\n{s.samples} samples in Python code; left out: {s.loop} in the native event loop "
        f"(uvloop's I/O, Temporal's core, epoll waits), {s.waiting} waiting"
    )
    return "\n".join(rows)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"\n{name}\n")
        with open(name) as f:
            print(table(summarise(f)))

"""Run stories on one embedded stack, each story and language as its own person, and
print the figures per scenario and in total. Any figure off its mark fails the run."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lomo.states import TaskStatus
from scenarios import stack as stacks
from scenarios.faults import Injector
from scenarios.figures import Figures, measure, vector_resurfaced
from scenarios.person import Person, ScenarioFailure
from scenarios.stories import STORIES, Story

LANGS = ("en", "de")
BUSY = (TaskStatus.RUNNING, TaskStatus.WAITING_GENERATION)
COLUMNS = (
    ("nudges", "continue"),
    ("unneeded_confirmations", "unneeded confirm"),
    ("duplicate_generations", "dup gen"),
    ("split_copies", "split"),
    ("stale_writes", "stale write"),
    ("resurfaced", "resurfaced"),
    ("lost", "lost"),
)


@dataclass
class Result:
    rows: list[tuple[str, str, Figures]] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    restarts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> Figures:
        out = Figures()
        for _, _, f in self.rows:
            out.add(f)
            if f.failure:
                out.failure = "yes"
        return out

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(f.ok for _, _, f in self.rows)


def select(names: Sequence[str] = (), short: bool = False) -> list[Story]:
    chosen = [s for s in STORIES if (not names or s.name in names) and (s.short or not short)]
    unknown = set(names) - {s.name for s in STORIES}
    if unknown:
        raise ValueError(f"unknown stories: {sorted(unknown)}; known: {[s.name for s in STORIES]}")
    return chosen


def _settle(p: Person, within: float = 120.0) -> None:
    """Before measuring: let running work finish (a fault may have delayed it)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        tasks = p.get_all("/v1/tasks", "tasks", include_lightweight="true")
        if not any(t["status"] in BUSY for t in tasks):
            return
        time.sleep(1.0)


def play(st: stacks.Stack, story: Story, lang: str, faults: bool = False) -> Figures:
    # Under faults a worker or dev server may be down for a minute: the person waits as
    # long for a busy task before poking it (a task that never wakes is still poked).
    # An answered card reaches a task only once a worker runs again: idle is judged over a
    # minute then, too.
    within, patience, idle = (900.0, 300.0, 60.0) if faults else (240.0, 90.0, 8.0)
    person = Person(st, st.new_person(f"{story.name}-{lang}"), lang, within, patience, idle)
    failure = ""
    try:
        story.run(person, story.words)
    except ScenarioFailure as e:
        failure = str(e)
    try:
        _settle(person)
        f = measure(person)
    except ScenarioFailure as e:
        f = Figures(failure=str(e))
    finally:
        person.close()
    if failure:
        f.failure = failure
    return f


def run(
    data_dir: Path,
    plays: Sequence[tuple[Story, str]],
    faults: bool = False,
    postgres: bool = False,
    seed: int = 15,
    write: Callable[[str], None] = lambda s: None,
    ports: dict[str, int] | None = None,
    fault_every: float = 20.0,
) -> Result:
    result = Result()
    st = stacks.start(data_dir, postgres=postgres, seed=seed, ports=ports)
    injector = Injector(st, seed, (fault_every, fault_every * 2.25)) if faults else None
    try:
        write(f"stack up in {data_dir} ({'postgres' if postgres else 'sqlite'})\n")
        if injector is not None:
            injector.start()
        for story, lang in plays:
            f = play(st, story, lang, faults)
            result.rows.append((story.name, lang, f))
            write(row(story.name, lang, f) + "\n")
            for why in f.why[:12]:
                write(f"    {why}\n")
            if f.failure:
                write(f"    FAILED: {f.failure}\n")
    finally:
        if injector is not None:
            injector.stop()
            result.faults = injector.done
        result.restarts = st.restarts()
        stacks.stop(st)
    check_vectors(st, result, write)
    return result


def check_vectors(
    st: stacks.Stack, result: Result, write: Callable[[str], None] = lambda s: None
) -> None:
    """With the worker stopped, search the memory index for every removed fact (the
    embedded index cannot be opened beside the worker)."""
    for name, lang, f in result.rows:
        if f.probe is None:
            continue
        try:
            found = st.memory_vectors(f.probe.user_id, [t for _, t in f.probe.facts])
        except stacks.StackError as e:
            f.failure = f.failure or f"vector check: {e}"
            continue
        before = f.resurfaced
        vector_resurfaced(f, f.probe, found)
        write(
            f"vectors {name} {lang}: {len(f.probe.facts)} removed facts searched, "
            f"{f.resurfaced - before} still in the index\n"
        )
        for why in f.why[-(f.resurfaced - before) :] if f.resurfaced > before else []:
            write(f"    {why}\n")


def header() -> str:
    cols = " | ".join(h for _, h in COLUMNS)
    return (
        f"| scenario | lang | {cols} | language kept | routing correct | generations | ok |\n|"
        + ("---|" * (len(COLUMNS) + 6))
    )


def row(name: str, lang: str, f: Figures) -> str:
    cols = " | ".join(str(getattr(f, a)) for a, _ in COLUMNS)
    return (
        f"| {name} | {lang} | {cols} | {f.language_kept:.0f}% ({f.replies_in_language}/"
        f"{f.replies_judged}) | {f.routing_correct:.0f}% ({f.routed_right}/{f.routed}) | "
        f"{f.generations} | {'yes' if f.ok else 'NO'} |"
    )


def report(result: Result) -> str:
    lines = [header()]
    lines += [row(n, lang, f) for n, lang, f in result.rows]
    lines.append(row("**total**", "", result.total))
    if result.faults:
        lines.append(f"\nfaults injected ({len(result.faults)}):")
        lines += [f"  - {x}" for x in result.faults]
    lines.append(f"restarts by the supervisor: {result.restarts}")
    return "\n".join(lines) + "\n"

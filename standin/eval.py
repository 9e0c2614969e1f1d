"""Held-out accuracy of the intent recogniser, per intent and per language.

python -m standin.eval [FILE ...]   (default: both clean sets, v2 and v3)
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from standin.intents import INTENTS, Recogniser, recogniser


@dataclass
class Report:
    total: int = 0
    right: int = 0
    by_intent: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    by_lang: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    wrong: list[tuple[str, str, str]] = field(default_factory=list)  # text, expected, got

    @property
    def accuracy(self) -> float:
        return self.right / self.total if self.total else 0.0

    def lines(self) -> list[str]:
        out = [f"overall {self.right}/{self.total} = {self.accuracy:.1%}"]
        for name, table in (("intent", self.by_intent), ("language", self.by_lang)):
            for key in sorted(table, key=lambda k: INTENTS.index(k) if k in INTENTS else 0):
                ok, n = table[key]
                out.append(f"  {name} {key:<10} {ok:>3}/{n:<3} {ok / n:.0%}")
        out += [f"  wrong: {t!r} expected {e}, got {g}" for t, e, g in self.wrong]
        return out


def evaluate(rows: list[dict[str, str]], rec: Recogniser) -> Report:
    report = Report()
    for row in rows:
        got = rec.recognise(row["text"]).intent or "unsure"
        ok = int(got == row["intent"])
        report.total += 1
        report.right += ok
        for table, key in ((report.by_intent, row["intent"]), (report.by_lang, row["lang"])):
            table[key][0] += ok
            table[key][1] += 1
        if not ok:
            report.wrong.append((row["text"], row["intent"], got))
    return report


def read_rows(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


CLEAN_SETS = ("tests/data/heldout_intents_v2.jsonl", "tests/data/heldout_intents_v3.jsonl")


def main(argv: list[str]) -> int:
    for path in map(Path, argv or CLEAN_SETS):
        report = evaluate(read_rows(path), recogniser())
        print("\n".join([path.name, *report.lines(), ""]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

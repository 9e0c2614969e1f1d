"""Okapi BM25 over short texts: the lexical half of recall (names, rare words and dates that
a sentence embedding blurs). Kept small and plain; one index per person, rebuilt when the
person's memory changed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from memory.text import normalize

# Function words only: a question's content words ("when", "who" carry nothing either).
STOP = frozenset(
    "a an the and or but of to in on at by for with from as is are was were be been being "
    "it its this that these those i you he she we they me him her us them my your his our "
    "their what when where who whom which why how do does did has have had will would can "
    "could should about into than then so if not no yes just also very".split()
)


def terms(text: str) -> list[str]:
    """The searchable words of a text: normalized, stop words out, a plural 's' folded."""
    out = []
    for w in normalize(text).split():
        if w in STOP:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.append(w)
    return out


class BM25:
    """Scores of a query against every document (k1, b: the usual defaults)."""

    def __init__(self, docs: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.lengths = [0] * len(docs)
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, doc in enumerate(docs):
            counts = Counter(terms(doc))
            self.lengths[i] = sum(counts.values())
            for term, n in counts.items():
                self.postings.setdefault(term, []).append((i, n))
        self.avg = (sum(self.lengths) / len(docs)) if docs else 0.0

    def scores(self, query: str) -> dict[int, float]:
        n_docs = len(self.lengths)
        out: dict[int, float] = {}
        for term in set(terms(query)):
            posting = self.postings.get(term, [])
            if not posting:
                continue
            idf = math.log(1 + (n_docs - len(posting) + 0.5) / (len(posting) + 0.5))
            for i, tf in posting:
                norm = tf + self.k1 * (1 - self.b + self.b * self.lengths[i] / (self.avg or 1))
                out[i] = out.get(i, 0.0) + idf * tf * (self.k1 + 1) / norm
        return out

    def top(self, query: str, limit: int) -> list[tuple[int, float]]:
        ranked = sorted(self.scores(query).items(), key=lambda kv: (-kv[1], kv[0]))
        return ranked[:limit]

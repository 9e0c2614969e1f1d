"""Episodic summaries written by the model: what happened in a phase of work.

`rebuild_summary` (memory/chains.py) keeps a draft inside the extraction's transaction: the
task's active memory versions, concatenated and linked (DERIVED), so forgetting finds and
empties it. Right after that transaction the model rewrites each draft into a short summary
of the same facts. The summary id is the idempotency key: a row is rewritten only while it
is still active and still holds the draft it was asked about, so a retry, a race or a
forget in between changes nothing twice and never brings forgotten words back.
"""

from __future__ import annotations

from sqlalchemy import select

from llm.types import Message, ModelProvider, ModelRequest, SystemBlock, TextBlock
from lomo.db.engine import Database
from memory.models import Summary

DRAFT = "In this task: "
EPISODE_RULES = (
    "Rewrite these facts from one task as a short episodic summary for later tasks, in at "
    "most 40 words. Keep every fact as stated, add nothing, keep names and colours exact."
)


async def write_episodes(db: Database, provider: ModelProvider, user_id: str) -> int:
    """Rewrite the person's draft summaries; returns how many were written."""
    async with db.session() as s:
        drafts = [
            (sm.id, sm.text)
            for sm in await s.scalars(
                select(Summary).where(Summary.user_id == user_id, Summary.status == "active")
            )
            if sm.text.startswith(DRAFT)
        ]
    written = 0
    for summary_id, draft in drafts:
        request = ModelRequest(
            system=[SystemBlock(text=EPISODE_RULES)],
            messages=[Message(role="user", content=[TextBlock(text=draft[len(DRAFT) :])])],
            max_tokens=200,
            purpose="summarize_episode",
        )
        text = (await provider.complete(request)).text.strip()
        if not text:
            continue  # the draft stays; the next extraction asks again
        async with db.session() as s:
            row = await s.get(Summary, summary_id, with_for_update=True)
            if row is not None and row.status == "active" and row.text == draft:
                row.text = text
                written += 1
    return written

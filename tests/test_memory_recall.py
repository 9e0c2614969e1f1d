"""Recall over the person's own words withholds what they took back: a forgotten message and
the words of a fact they corrected leave every index recall reads (the evidence vectors, the
lexical corpus and its cache), and a recall by their exact words finds nothing of them.
Real SQL on SQLite and Postgres, the embedded vector engine, the offline extractor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import select

from cards.store import answer_card, create_card
from lomo.db.engine import Database
from memory.context import memory_for_context
from memory.models import Evidence, MemoryLink, MemoryVersion
from memory.recall import corpus
from memory.types import CorrectInput, ForgetInput
from tests.memory_support import Env, make_env

BLUE = "Our brand's main colour is blue."
POTTERY = "I went to a pottery class yesterday and made a turquoise bowl."
FILLER = (
    "Our brand's font is Futura.",
    "We are planning a poster for the spring market.",
    "The bakery opens at seven on weekdays.",
)


@pytest.fixture
async def env(db: Database, tmp_path: Path) -> AsyncIterator[Env]:
    e = await make_env(db, tmp_path)
    # What recall finds is under test, not how fast: a loaded machine must not turn the
    # answer into the profile-only one of a timed-out search.
    e.deps.settings = e.deps.settings.model_copy(update={"memory_timeout_seconds": 60.0})
    yield e
    await e.services.index.close()
    await e.deps.http.aclose()


async def _recalled(env: Env, query: str) -> str:
    """Everything a step of another task is shown from memory for `query`."""
    ctx = await memory_for_context(env.deps, env.user_id, "tsk_other", query)
    assert ctx.degraded is None, ctx.degraded
    return "\n".join([ctx.profile_text, *ctx.items]).lower()


async def _indexed(env: Env, text: str) -> set[str]:
    """The evidence ids the vector index (nearest to `text`) and the lexical corpus hold."""
    await env.services.ready()
    [vec] = await env.services.embed([text])
    hits = await env.services.index.search(
        env.services.evidence_collection, vec, 100, {"user_id": env.user_id}
    )
    lexical = await corpus(env.db, env.user_id)
    return {h.id for h in hits} | set(lexical.ids)


async def _forget(env: Env, text: str) -> list[str]:
    async with env.db.session() as s:
        card = await create_card(
            s, user_id=env.user_id, kind="forget", title="forget?", payload={"text": text}
        )
    async with env.db.session() as s:
        await answer_card(s, env.user_id, card.id, "confirm")
    out = await env.acts.forget(ForgetInput(env.user_id, card.id))
    return list(out.evidence_ids)


async def test_a_forgotten_message_is_gone_from_every_index_recall_reads(env: Env) -> None:
    said = await env.say(POTTERY)
    for text in FILLER:
        await env.say(text)
    # Recalled before (which also fills the lexical cache the forget must not outlive).
    assert "pottery" in await _recalled(env, POTTERY)
    assert said.evidence_id in await _indexed(env, POTTERY)

    assert said.evidence_id in await _forget(env, "pottery class bowl")
    for query in (POTTERY, "pottery class", "turquoise bowl yesterday"):
        text = await _recalled(env, query)
        assert "pottery" not in text and "turquoise" not in text, text
    assert said.evidence_id not in await _indexed(env, POTTERY)
    assert "futura" in await _recalled(env, "Futura font")  # the rest stays


async def test_a_forgotten_fact_and_its_words_never_come_back(env: Env) -> None:
    said = await env.say(BLUE)
    for text in FILLER:
        await env.say(text)
    assert "blue" in await _recalled(env, BLUE)
    assert said.evidence_id in await _forget(env, "main colour blue")
    assert "blue" not in await _recalled(env, BLUE)
    assert said.evidence_id not in await _indexed(env, BLUE)


async def test_words_the_person_corrected_are_withheld_even_as_history(env: Env) -> None:
    """A correction says the old value was wrong (a change over time keeps it as history):
    the message that stated it leaves recall, the corrected fact is shown in its place."""
    said = await env.say(BLUE)
    for text in FILLER:
        await env.say(text)
    assert "blue" in await _recalled(env, BLUE)
    memory_id = await _memory_of(env, said.evidence_id)
    async with env.db.session() as s:
        ev = Evidence(
            id="evd_correction1",
            user_id=env.user_id,
            source="correction",
            source_ref=f"{memory_id}:cor_1",
            text="Our brand's main colour is green.",
            usable=True,
            candidates=[],
        )
        s.add(ev)
    await env.acts.correct(CorrectInput(env.user_id, ev.id))

    for query in (BLUE, "main colour blue", "brand colour"):
        text = await _recalled(env, query)
        assert "blue" not in text, text
        assert "green" in text
    assert said.evidence_id not in await _indexed(env, BLUE)

    await _forget(env, "main colour green")  # and forgetting the correction brings nothing back
    for query in (BLUE, "Our brand's main colour is green.", "brand colour"):
        text = await _recalled(env, query)
        assert "blue" not in text and "green" not in text, text


async def _memory_of(env: Env, evidence_id: str) -> str:
    async with env.db.session() as s:
        memory_id = await s.scalar(
            select(MemoryVersion.memory_id)
            .join(MemoryLink, MemoryLink.target_id == MemoryVersion.id)
            .where(MemoryLink.source_id == evidence_id)
        )
    assert memory_id is not None
    return str(memory_id)

"""Episodic summaries written by the model: the extraction keeps a linked draft, the model
(here the offline stand-in) rewrites it shorter with the same facts, and forgetting reaches
the rewritten summary too (it is deleted over its links and written again without it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import select

from lomo.db.engine import Database
from memory.episodes import DRAFT
from memory.models import Memory, MemoryVersion, Summary
from memory.types import ForgetInput
from standin.model import OfflineModel
from tests.memory_support import Env, make_env
from tests.test_memory_store import _card


@pytest.fixture
async def env(db: Database, tmp_path: Path) -> AsyncIterator[Env]:
    e = await make_env(db, tmp_path, provider=OfflineModel())
    yield e
    await e.services.index.close()
    await e.deps.http.aclose()


async def _summaries(env: Env) -> list[Summary]:
    async with env.db.session() as s:
        return list(await s.scalars(select(Summary).where(Summary.task_id == "tsk_a")))


async def test_model_writes_the_episode_and_forgetting_reaches_it(env: Env) -> None:
    await env.say("Let's try a saturated red this time.", task_id="tsk_a")
    await env.say("For this poster, use the Futura typeface this time.", task_id="tsk_a")
    rows = await _summaries(env)
    active = [r for r in rows if r.status == "active"]
    assert len(active) == 1
    text = active[0].text
    assert text.startswith("Episode:") and "saturated red" in text and "Futura" in text
    # Shorter than the concatenation of the task's facts that the draft was.
    async with env.db.session() as s:
        facts = list(
            await s.scalars(
                select(MemoryVersion.content)
                .join(Memory, Memory.id == MemoryVersion.memory_id)
                .where(Memory.task_id == "tsk_a", MemoryVersion.status == "active")
            )
        )
    assert len(facts) == 2
    assert len(text) < len(DRAFT + " ".join(facts))

    card = await _card(env, text="saturated red")
    await env.acts.forget(ForgetInput(env.user_id, card.id))
    rows = await _summaries(env)
    assert all("red" not in r.text for r in rows), [(r.status, r.text) for r in rows]
    active = [r for r in rows if r.status == "active"]
    assert len(active) == 1 and active[0].text.startswith("Episode:")
    assert "Futura" in active[0].text

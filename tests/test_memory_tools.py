"""The agent's memory tools: forgetting only through the person's confirmation card (the
same card on a retried call), recall with provenance."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import select

from lomo.db.engine import Database
from lomo.db.models import Card
from memory.models import Evidence
from tests.memory_support import Env, make_env
from tools.base import ToolCallContext
from tools.memory import ForgetMemory, RecallMemory


@pytest.fixture
async def env(db: Database, tmp_path: Path) -> AsyncIterator[Env]:
    e = await make_env(db, tmp_path)
    yield e
    await e.services.index.close()
    await e.deps.http.aclose()


def _ctx(env: Env, index: int = 0) -> ToolCallContext:
    return ToolCallContext("tsk_1", env.user_id, f"tsk_1:1:1:{index}", 1, 1, index)


async def test_forget_tool_only_opens_a_card(env: Env) -> None:
    await env.say("Our brand's main colour is blue.")
    tool = ForgetMemory(env.deps)
    first = await tool.run(_ctx(env), {"text": "blue"})
    again = await tool.run(_ctx(env), {"text": "blue"})  # a retry of the same call
    assert first.status == "needs_confirmation" and first.card_id == again.card_id
    async with env.db.session() as s:
        cards = list(await s.scalars(select(Card).where(Card.kind == "forget")))
        usable = [e.usable for e in await s.scalars(select(Evidence))]
    assert [(c.task_id, c.status) for c in cards] == [("tsk_1", "open")]
    assert usable == [True]  # nothing forgotten before the person confirms
    refused = await tool.run(_ctx(env, 1), {"memory_id": "mem_nope"})
    assert refused.status == "error"
    empty = await tool.run(_ctx(env, 2), {})
    assert empty.status == "error"


async def test_recall_tool_returns_memories_with_sources(env: Env) -> None:
    await env.say("Our brand's font is Futura.")
    await env.say("Let's try a saturated red this time.", task_id="tsk_1")
    out = await RecallMemory(env.deps).run(_ctx(env), {"query": "red poster"})
    assert out.status == "done" and out.result["profile_version"] == 1
    [red] = [m for m in out.result["memories"] if "saturated red" in m]
    assert "ORIGIN msg_" in red and "task" in red
    bad = await RecallMemory(env.deps).run(_ctx(env), {"query": " "})
    assert bad.status == "error"

"""The memory service below the workflow: extraction, version chains, forgetting, retrieval
(real SQL on SQLite and Postgres, the embedded vector engine, the offline extractor)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.exceptions import ApplicationError

from cards.store import answer_card, create_card
from lomo.db.engine import Database
from lomo.db.models import MessageRow, utcnow
from lomo.db.pages import Page
from lomo.db.query import run
from memory.context import exclusions, memory_for_context, usage_queries
from memory.models import Evidence, Memory, MemoryLink, MemoryVersion, ProfileSnapshot, Summary
from memory.types import CorrectInput, ForgetInput
from memory.views import history, list_memories, profile
from tests.memory_support import Env, ScriptedExtractor, make_env
from vectors import VectorPoint

BLUE = "Our brand's main colour is blue."
CREAM = "Blue with cream white feels softer overall."


@pytest.fixture
async def env(db: Database, tmp_path: Path) -> AsyncIterator[Env]:
    e = await make_env(db, tmp_path)
    yield e
    await e.services.index.close()
    await e.deps.http.aclose()


async def _forget(env: Env, memory_id: str | None = None, text: str | None = None) -> Any:
    card = await _card(env, memory_id, text)
    return await env.acts.forget(ForgetInput(env.user_id, card.id))


async def _memories(env: Env, scope: str | None = None) -> list[dict[str, Any]]:
    """Every active memory, page by page (a page of 2 so the paging is exercised too)."""
    out: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        async with env.db.session() as s:
            rows, after = await list_memories(s, env.user_id, scope, Page(2, after))
        out += rows
        if after is None:
            return out


async def _vector_count(env: Env) -> int:
    await env.services.ready()
    return await env.services.index.count(env.services.collection, {"user_id": env.user_id})


async def test_article_example_refine_then_forget(env: Env) -> None:
    out1 = await env.say(BLUE)
    assert (out1.stored, out1.dropped) == (1, 0)
    [m1] = await _memories(env)
    assert (m1["version"], m1["relation"], m1["status"]) == (1, "ORIGIN", "active")
    assert m1["sources"][0]["relation"] == "ORIGIN"
    async with env.db.session() as s:
        assert (await profile(s, env.user_id))["version"] == 1

    await env.say(CREAM)
    [m2] = await _memories(env)
    assert m2["memory_id"] == m1["memory_id"]
    assert (m2["version"], m2["relation"]) == (2, "REFINE")
    assert "cream white" in m2["content"]
    async with env.db.session() as s:
        chain = await history(s, env.user_id, m1["memory_id"], Page(200))
        prof = await profile(s, env.user_id)
    assert [(v["version"], v["status"]) for v in chain["versions"]] == [
        (1, "superseded"),
        (2, "active"),
    ]
    assert prof["version"] == 2 and "cream white" in prof["items"][0]["content"]
    assert await _vector_count(env) == 1  # only the active version is indexed

    ctx = await memory_for_context(env.deps, env.user_id, "tsk_next", "brand colours for a poster")
    assert ctx.degraded is None and "cream white" in ctx.profile_text

    out = await env.acts.forget(
        ForgetInput(env.user_id, (await _card(env, text="our brand's main colour is blue")).id)
    )
    assert sorted(out.deleted_version_ids) == sorted(v["version_id"] for v in chain["versions"])
    assert await _memories(env) == []
    async with env.db.session() as s:
        chain = await history(s, env.user_id, m1["memory_id"], Page(200))
        prof = await profile(s, env.user_id)
        old = list(await s.scalars(select(ProfileSnapshot)))
        excl = await exclusions(s, env.user_id)
        msg_ids = set(await s.scalars(select(MessageRow.id).where(MessageRow.text == BLUE)))
    assert chain["status"] == "deleted"
    assert all(v["status"] == "deleted" and v["content"] == "" for v in chain["versions"])
    assert prof["version"] == 3 and prof["items"] == []
    assert all("blue" not in str(snap.items).lower() for snap in old)  # old snapshots scrubbed
    assert await _vector_count(env) == 0
    assert excl.message_ids == msg_ids

    ctx = await memory_for_context(env.deps, env.user_id, "tsk_next", "brand colours blue cream")
    text = (ctx.profile_text + " ".join(ctx.items)).lower()
    assert ctx.degraded is None and "blue" not in text and "cream" not in text
    assert ctx.profile_version == 3

    again = await env.say(BLUE)  # the same words later: suppressed, not a memory again
    assert (again.stored, again.dropped) == (0, 1)
    assert await _memories(env) == []
    anew = await env.say("Remember that our brand's main colour is blue.")  # stated anew
    assert anew.stored == 1
    [m3] = await _memories(env)
    assert m3["memory_id"] != m1["memory_id"] and m3["version"] == 1


async def _card(
    env: Env, memory_id: str | None = None, text: str | None = None, action: str = "confirm"
) -> Any:
    """A forget card the person answered (`action=None`: still open)."""
    async with env.db.session() as s:
        card = await create_card(
            s,
            user_id=env.user_id,
            kind="forget",
            title="forget?",
            payload={"memory_id": memory_id, "text": text},
        )
    if action:
        async with env.db.session() as s:
            await answer_card(s, env.user_id, card.id, action)
    return card


async def test_forgetting_only_the_refinement_restores_the_origin(env: Env) -> None:
    await env.say(BLUE)
    await env.say(CREAM)
    [m] = await _memories(env)
    await _forget(env, text="cream white")
    [back] = await _memories(env)
    assert back["memory_id"] == m["memory_id"]
    assert (back["version"], back["content"]) == (1, "The brand's main colour is blue.")
    assert await _vector_count(env) == 1
    async with env.db.session() as s:
        assert "cream" not in str((await profile(s, env.user_id))["items"]).lower()


async def test_forgetting_a_correction_never_restores_what_it_corrected(env: Env) -> None:
    # Found by the scenario harness (correct-forget): blue came back after green was forgotten.
    await env.say(BLUE)
    [m] = await _memories(env)
    async with env.db.session() as s:
        ev = Evidence(
            id="evd_correction1",
            user_id=env.user_id,
            source="correction",
            source_ref=f"{m['memory_id']}:cor_1",
            text="The brand's main colour is green.",
            usable=True,
            candidates=[],
        )
        s.add(ev)
    await env.acts.correct(CorrectInput(env.user_id, ev.id))
    [green] = await _memories(env)
    assert "green" in green["content"]
    await _forget(env, text="main colour green")
    assert await _memories(env) == []
    assert await _vector_count(env) == 0
    async with env.db.session() as s:
        items = str((await profile(s, env.user_id))["items"]).lower()
    assert "blue" not in items and "green" not in items


async def test_confirm_is_a_link_and_forgetting_it_only_detaches(env: Env) -> None:
    await env.say(BLUE)
    out = await env.say("As I said: our brand's main colour is blue!")
    assert out.stored == 1
    [m] = await _memories(env)
    assert m["version"] == 1
    assert sorted(src["relation"] for src in m["sources"]) == ["CONFIRM", "ORIGIN"]
    await _forget(env, text="as i said")
    [still] = await _memories(env)
    assert still["version_id"] == m["version_id"]
    assert [src["relation"] for src in still["sources"]] == ["ORIGIN"]


async def test_time_changing_fact_keeps_both_and_unrelated_facts_stay(env: Env) -> None:
    await env.say(BLUE)
    await env.say("Our brand's font is Futura.")
    await env.say("Our brand's main colour is now green.")
    active = {(m["attribute"], m["content"]) for m in await _memories(env)}
    assert active == {
        ("main_colour", "The brand's main colour is green."),
        ("font", "The brand's font is Futura."),
    }
    colour = next(m for m in await _memories(env) if m["attribute"] == "main_colour")
    async with env.db.session() as s:
        chain = (await history(s, env.user_id, colour["memory_id"], Page(200)))["versions"]
    assert [(v["relation"], v["status"]) for v in chain] == [
        ("ORIGIN", "superseded"),
        ("CHANGE", "active"),
    ]
    assert chain[0]["valid_to"] == chain[1]["valid_from"]  # blue held until green began
    await _forget(env, text=BLUE)  # forgetting the old value leaves the new one alone
    assert {m["content"] for m in await _memories(env)} == {
        "The brand's main colour is green.",
        "The brand's font is Futura.",
    }


async def test_temporary_instruction_stays_in_its_task(env: Env) -> None:
    await env.say("Let's try a saturated red this time.", task_id="tsk_a")
    await env.say("Ich mag normalerweise Farbpaletten mit geringer Sättigung.")
    task_mems = await _memories(env, "task")
    assert [(m["task_id"], m["kind"]) for m in task_mems] == [("tsk_a", "stated")]
    async with env.db.session() as s:
        prof = await profile(s, env.user_id)
        summary = await s.scalar(select(Summary).where(Summary.task_id == "tsk_a"))
    assert "red" not in str(prof["items"]) and "Sättigung" in str(prof["items"])
    assert summary is not None and "saturated red" in summary.text
    same = await memory_for_context(env.deps, env.user_id, "tsk_a", "poster colour red")
    other = await memory_for_context(env.deps, env.user_id, "tsk_b", "poster colour red")
    assert any("saturated red" in i for i in same.items)
    assert not any("red" in i for i in other.items)


async def test_a_stale_vector_never_shows_what_sql_does_not_allow(env: Env) -> None:
    """The index's payload only narrows the search: a vector left visible to every task, or
    left behind by a version SQL no longer has active, shows nothing SQL does not allow."""
    await env.say("Let's try a saturated red this time.", task_id="tsk_a")
    [m] = await _memories(env, "task")
    stale = {"user_id": env.user_id, "visibility": "user", "memory_id": m["memory_id"]}
    [vec] = env.services.embedder.embed([m["content"]])
    await env.services.index.upsert(
        env.services.collection, [VectorPoint(m["version_id"], vec, stale)]
    )
    other = await memory_for_context(env.deps, env.user_id, "tsk_b", "saturated red")
    assert other.items == [] and other.version_ids == []
    same = await memory_for_context(env.deps, env.user_id, "tsk_a", "saturated red")
    assert any("saturated red" in i for i in same.items)
    async with env.db.session() as s:
        version = await s.get(MemoryVersion, m["version_id"])
        assert version is not None
        version.status = "deleted"  # the vector is still there
    gone = await memory_for_context(env.deps, env.user_id, "tsk_a", "saturated red")
    assert gone.items == []


async def test_each_candidate_is_judged_alone(db: Database, tmp_path: Path) -> None:
    text = "Our brand's main colour is blue. I read that cyberpunk is trending."
    good = {
        "content": "The brand's main colour is blue.",
        "kind": "stated",
        "scope": "profile",
        "subject": "brand",
        "attribute": "main colour",
        "value": "blue",
        "quote": "Our brand's main colour is blue.",
    }
    web = {
        **good,
        "subject": "person",
        "attribute": "age",
        "value": "42",
        "content": "The person is 42.",
        "quote": "age: 42 (from a web profile)",
    }
    inferred = {
        **good,
        "kind": "inferred",
        "subject": "person",
        "attribute": "taste",
        "value": "cyberpunk",
        "content": "May like cyberpunk.",
        "quote": "cyberpunk is trending",
    }
    overrides_stated = {**good, "kind": "inferred", "value": "navy", "content": "Navy."}
    env = await make_env(
        db,
        tmp_path,
        ScriptedExtractor([good, {"content": 3}, "nonsense", web, inferred, overrides_stated]),
    )
    out = await env.say(text)
    assert (out.stored, out.dropped) == (2, 4)
    async with env.db.session() as s:
        ev = await s.scalar(select(Evidence).where(Evidence.user_id == env.user_id))
        assert ev is not None
        reasons = [c["reason"] for c in ev.candidates]
        kinds = {m.attribute: m.kind for m in await s.scalars(select(Memory))}
        prof = await profile(s, env.user_id)
    assert reasons == [
        "ok",
        "bad_format",
        "bad_format",
        "unsupported",
        "ok",
        "inferred_cannot_change_stated",
    ]
    assert kinds == {"main_colour": "stated", "taste": "inferred"}
    assert [i["content"] for i in prof["items"]] == ["The brand's main colour is blue."]
    await env.services.index.close()


async def test_unusable_model_output_is_not_retried(db: Database, tmp_path: Path) -> None:
    env = await make_env(db, tmp_path, ScriptedExtractor("not a list"))
    with pytest.raises(ApplicationError) as info:
        await env.say(BLUE)
    assert info.value.non_retryable
    await env.services.index.close()


async def test_extraction_and_forget_are_idempotent(env: Env) -> None:
    mid = await env.message(BLUE)
    from memory.types import ExtractInput

    first = await env.acts.extract(ExtractInput(env.user_id, mid))
    second = await env.acts.extract(ExtractInput(env.user_id, mid))
    assert first.stored == 1 and second.skipped == "already_extracted"
    async with env.db.session() as s:
        assert len(list(await s.scalars(select(MemoryVersion)))) == 1
    card = await _card(env, text="blue")
    one = await env.acts.forget(ForgetInput(env.user_id, card.id))
    two = await env.acts.forget(ForgetInput(env.user_id, card.id))
    assert one == two
    async with env.db.session() as s:
        assert len(list(await s.scalars(select(ProfileSnapshot)))) == 2


async def test_usage_of_forgotten_versions_excludes_those_steps(env: Env) -> None:
    await env.say(BLUE)
    await env.say("Our brand's font is Futura.")
    ctx = await memory_for_context(env.deps, env.user_id, "tsk_1", "brand")
    assert len(ctx.version_ids) == 2
    async with env.db.session() as s:
        for q in [*usage_queries("tsk_1", 1, 1, ctx.version_ids, utcnow())] * 2:  # idempotent
            await run(s, q)
        font = [v for v in await s.scalars(select(MemoryVersion)) if "Futura" in v.content]
        for q in usage_queries("tsk_1", 2, 1, [font[0].id], utcnow()):
            await run(s, q)
    await _forget(env, text="blue")
    async with env.db.session() as s:
        excl = await exclusions(s, env.user_id)
    assert excl.step_keys == {("tsk_1", 1, 1)}


async def test_forget_by_memory_id_takes_its_whole_chain(env: Env) -> None:
    await env.say(BLUE)
    await env.say(CREAM)
    await env.say("Our brand's font is Futura.")
    colour = next(m for m in await _memories(env) if m["attribute"] == "main_colour")
    await _forget(env, memory_id=colour["memory_id"])
    assert [m["attribute"] for m in await _memories(env)] == ["font"]
    async with env.db.session() as s:
        links = list(await s.scalars(select(MemoryLink)))
        usable = {e.text: e.usable for e in await s.scalars(select(Evidence))}
    assert usable == {BLUE: False, CREAM: False, "Our brand's font is Futura.": True}
    assert links  # provenance stays for the audit trail; content is gone


async def test_only_a_confirmed_card_forgets(env: Env) -> None:
    await env.say(BLUE)
    for action in (None, "reject"):
        card = await _card(env, text="blue", action=action)  # type: ignore[arg-type]
        with pytest.raises(ApplicationError) as info:
            await env.acts.forget(ForgetInput(env.user_id, card.id))
        assert info.value.non_retryable and "not confirmed" in str(info.value)
    assert len(await _memories(env)) == 1


async def test_a_confirmed_forget_whose_signal_was_lost_runs_before_extraction(env: Env) -> None:
    await env.say(BLUE)
    await _card(env, text="blue")  # confirmed, but the cascade was never started
    out = await env.say(BLUE)  # the next job of the person runs the forget first
    assert (out.stored, out.dropped) == (0, 1)
    assert await _memories(env) == []
    assert await _vector_count(env) == 0


class _FailOnce:
    """Wraps the index: the next write fails once (a crash between SQL commit and index)."""

    def __init__(self, env: Env) -> None:
        self.inner = env.services.index
        self.armed = True

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in ("upsert", "delete", "delete_where"):
            return attr

        async def maybe_fail(*args: Any, **kw: Any) -> Any:
            if self.armed:
                self.armed = False
                raise ConnectionError("index down mid-activity")
            return await attr(*args, **kw)

        return maybe_fail


async def test_a_retry_repairs_the_index_after_a_crash_past_the_sql_commit(env: Env) -> None:
    from memory.types import ExtractInput

    await env.say(BLUE)
    env.services.index = _FailOnce(env)  # type: ignore[assignment]
    mid = await env.message(CREAM)
    with pytest.raises(ConnectionError):
        await env.acts.extract(ExtractInput(env.user_id, mid))
    [m] = await _memories(env)  # SQL committed: v2 active, v1 superseded
    assert m["version"] == 2
    retry = await env.acts.extract(ExtractInput(env.user_id, mid))  # Temporal's retry
    assert retry.skipped == "already_extracted"
    hits = await env.services.index.search(
        env.services.collection, (await env.services.embed([CREAM]))[0], 10
    )
    assert [h.id for h in hits] == [m["version_id"]]  # v2 indexed, v1's vector gone

    env.services.index = _FailOnce(env)  # type: ignore[assignment]
    card = await _card(env, text="blue")
    with pytest.raises(ConnectionError):
        await env.acts.forget(ForgetInput(env.user_id, card.id))
    assert await _vector_count(env) == 1  # the SQL cascade committed, the index lags
    await env.acts.forget(ForgetInput(env.user_id, card.id))
    assert await _vector_count(env) == 0


async def test_instruction_extracted_before_routing_joins_its_task(env: Env) -> None:
    mid = await env.message("Probieren wir diesmal ein kräftig gesättigtes Rot.")
    from memory.types import ExtractInput

    await env.acts.extract(ExtractInput(env.user_id, mid))  # routing has not decided yet
    [m] = await _memories(env, "task")
    assert m["task_id"] is None
    async with env.db.session() as s:
        msg = await s.get(MessageRow, mid)
        assert msg is not None
        msg.task_id = "tsk_r"  # the main thread routed the message
    other = await memory_for_context(env.deps, env.user_id, "tsk_other", "Rot Plakat")
    assert not any("Rot" in i for i in other.items)
    mine = await memory_for_context(env.deps, env.user_id, "tsk_r", "Rot Plakat")
    assert any("gesättigtes Rot" in i for i in mine.items)
    [m] = await _memories(env, "task")
    assert m["task_id"] == "tsk_r"

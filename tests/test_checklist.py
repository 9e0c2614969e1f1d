"""The runtime validates the model's checklist changes: all or nothing, no
done step without evidence, no silent deletion or reopening, confirmation steps done only
by the person's answer, and a replayed call adds nothing twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from cards.store import answer_card
from checklist.items import load_items
from lomo.db.engine import Database
from lomo.db.models import Task
from lomo.settings import Settings
from tests.runtime_support import new_user
from tools.base import ToolCallContext, ToolDeps
from tools.checklist import AskPerson, UpdateChecklist
from workspace.store import AssetStore, create_asset


async def _setup(db: Database, tmp: Path) -> tuple[ToolDeps, str, str]:
    user = await new_user(db)
    async with db.session() as s:
        s.add(Task(id="tsk_chk", user_id=user, kind="persistent", goal="posters"))
    deps = ToolDeps(db, httpx.AsyncClient(), AssetStore(tmp / "assets"), Settings(data_dir=tmp))
    return deps, user, "tsk_chk"


def _ctx(user: str, task: str, turn: int, index: int = 0) -> ToolCallContext:
    return ToolCallContext(task, user, f"{task}:{turn}:1:{index}", turn, 1, index)


async def _run(tool: Any, ctx: ToolCallContext, args: dict[str, Any]) -> Any:
    return await tool.run(ctx, args)


async def test_checklist_rules(db: Database, tmp_path: Path) -> None:
    deps, user, task = await _setup(db, tmp_path)
    upd, ask = UpdateChecklist(deps), AskPerson(deps)
    plan = {"add": [{"title": "Drafts"}, {"title": "Pick one", "requires_confirmation": True}]}
    first = await _run(upd, _ctx(user, task, 1), plan)
    assert first.status == "done" and not first.made_progress  # a plan is not progress
    again = await _run(upd, _ctx(user, task, 1), plan)  # the same call replayed
    async with db.session() as s:
        items = await load_items(s, task)
    assert len(items) == 2 and again.status == "done"
    drafts, pick = items

    # No evidence, unknown ids, bad statuses: refused whole, with every reason.
    bad = await _run(
        upd,
        _ctx(user, task, 2),
        {
            "update": [{"id": drafts.id, "status": "done"}, {"id": "chk_nope", "status": "done"}],
            "add": [{"title": "Extra"}],
        },
    )
    assert bad.status == "error" and len(bad.result["reasons"]) == 2
    async with db.session() as s:
        assert [i.status for i in await load_items(s, task)] == ["open", "open"]

    # A made-up artifact is no evidence; a real asset is.
    fake = await _run(
        upd,
        _ctx(user, task, 3),
        {"update": [{"id": drafts.id, "status": "done", "artifacts": ["obj_made_up"]}]},
    )
    assert fake.status == "error"
    async with db.session() as s:
        asset = await create_asset(
            s,
            deps.assets,
            user,
            name="draft",
            data=b"\x89PNG",
            media_type="image/png",
            created_by="user",
            provenance={},
            task_id=task,
        )
    ok = await _run(
        upd,
        _ctx(user, task, 4),
        {"update": [{"id": drafts.id, "status": "done", "artifacts": [asset.id]}]},
    )
    assert ok.status == "done" and ok.made_progress and ok.result["done"] == [drafts.id]

    # Done steps are never reopened or skipped away.
    reopen = await _run(upd, _ctx(user, task, 5), {"update": [{"id": drafts.id, "status": "open"}]})
    skip = await _run(
        upd, _ctx(user, task, 5, 1), {"update": [{"id": drafts.id, "status": "skipped"}]}
    )
    assert reopen.status == skip.status == "error"

    # A confirmation step: not by the model's word, not by an open card; by the answer.
    claim = await _run(
        upd,
        _ctx(user, task, 6),
        {"update": [{"id": pick.id, "status": "done", "note": "the person approved"}]},
    )
    assert claim.status == "error"
    asked = await _run(
        ask,
        _ctx(user, task, 7),
        {
            "kind": "select",
            "title": "Pick one",
            "item_id": pick.id,
            "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}],
        },
    )
    assert asked.status == "done" and asked.card_id
    early = await _run(
        upd,
        _ctx(user, task, 8),
        {"update": [{"id": pick.id, "status": "done", "card_id": asked.card_id}]},
    )
    assert early.status == "error"
    async with db.session() as s:
        await answer_card(s, user, asked.card_id, "select", "b")
    done = await _run(
        upd,
        _ctx(user, task, 9),
        {"update": [{"id": pick.id, "status": "done", "card_id": asked.card_id}]},
    )
    assert done.status == "done"
    async with db.session() as s:
        assert [i.status for i in await load_items(s, task)] == ["done", "done"]
    await deps.http.aclose()


async def test_ask_person_refuses_bad_cards(db: Database, tmp_path: Path) -> None:
    deps, user, task = await _setup(db, tmp_path)
    ask = AskPerson(deps)
    one_option = await _run(
        ask,
        _ctx(user, task, 1),
        {"kind": "select", "title": "Pick", "options": [{"id": "a", "label": "A"}]},
    )
    wrong_kind = await _run(ask, _ctx(user, task, 1, 1), {"kind": "price", "title": "Pay"})
    assert one_option.status == wrong_kind.status == "error"
    await deps.http.aclose()

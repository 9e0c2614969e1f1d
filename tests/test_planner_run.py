"""Multi-part work planned by the offline stand-in for any subject, end to end over HTTP
with the real Temporal dev server, on both databases: a children's book and a brand kit
each become a persistent task whose checklist comes from the request, one price card for
the whole plan, drafts, a select card offering exactly those drafts, and finals made from
the chosen one, all checked as stored rows; the replies say what is made, never "Done"
before it exists, and carry no raw ids."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.client import Client

from lomo.db.models import (
    Card,
    ChecklistItem,
    GenerationOrder,
    ModelStep,
    ObjectVersion,
    WorkObject,
)
from standin.planner import plan_of
from tests.helpers import eventually
from tests.stack import Stack, running_stack

pytestmark = pytest.mark.slow

RAW_ID = re.compile(r"\b(?:obj|tsk|ord|crd|chk)_[0-9a-z]+\b")
BOOK_EN = "Create a children's book about a brave little turtle"
BOOK_DE = "Erstelle ein Kinderbuch über eine mutige kleine Schildkröte"
KIT_EN = "Make a brand kit for my bakery"
KIT_DE = "Entwirf ein Markenpaket für mein Café"

# Each subject on each database; the planned titles are what the request implies.
CASES = pytest.mark.parametrize(
    ("db_url", "text", "parts"),
    [
        ("sqlite", BOOK_EN, ["Cover", "4 pages"]),
        ("postgres", BOOK_DE, ["Umschlag", "4 Seiten"]),
        ("sqlite", KIT_DE, ["Logo", "Farbpaletten-Karte", "Visitenkarte"]),
        ("postgres", KIT_EN, ["Logo", "Colour palette card", "Business card"]),
    ],
    ids=["book-en-sqlite", "book-de-postgres", "kit-de-sqlite", "kit-en-postgres"],
    indirect=["db_url"],
)


async def _task(st: Stack, tid: str) -> dict[str, Any]:
    return (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()  # type: ignore[no-any-return]


async def _until(st: Stack, tid: str, pred: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    async def check() -> Any:
        t = await _task(st, tid)
        return t if pred(t) else None

    try:
        return await eventually(check, within=150)  # type: ignore[no-any-return]
    except AssertionError as e:
        raise AssertionError(f"task never got there: {await _task(st, tid)}") from e


def _open(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda t: (
        t["status"] == "waiting_user"
        and any(c["kind"] == kind and c["status"] == "open" for c in t["cards"])
    )


async def _answer(st: Stack, t: dict[str, Any], kind: str, **body: str) -> dict[str, Any]:
    card = next(c for c in t["cards"] if c["kind"] == kind and c["status"] == "open")
    r = await st.api.post(f"/v1/cards/{card['card_id']}/actions", json=body, headers=st.auth)
    assert r.status_code == 200, r.text
    return card  # type: ignore[no-any-return]


def _texts(value: Any) -> list[str]:
    """The text blocks anywhere in a stored model response."""
    if isinstance(value, dict):
        if value.get("type") == "text" and isinstance(value.get("text"), str):
            return [value["text"]]
        return [x for v in value.values() for x in _texts(v)]
    if isinstance(value, list):
        return [x for v in value for x in _texts(v)]
    return []


async def _start(st: Stack, text: str) -> str:
    mid = (await st.api.post("/v1/messages", json={"text": text}, headers=st.auth)).json()[
        "message_id"
    ]

    async def routed() -> Any:
        m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
        return m["routing"] if m["routing"].get("task_id") else None

    routing = await eventually(routed, within=60)
    assert routing["decision"] == "new", routing
    return str(routing["task_id"])


@CASES
async def test_a_request_for_multipart_work_is_planned_drafted_picked_and_finished(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    text: str,
    parts: list[str],
) -> None:
    plan = plan_of(text, "de" if text in (BOOK_DE, KIT_DE) else "en")
    drafts, finals = len(plan.drafts), sum(len(p.prompts) for p in plan.parts)
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        tid = await _start(st, text)
        t = await _until(st, tid, _open("price"))
        assert t["kind"] == "persistent"
        assert [i["title"] for i in t["checklist"]][3:] == parts
        price = await _answer(st, t, "price", action="confirm")
        t = await _until(st, tid, _open("select"))
        pick = await _answer(
            st, t, "select", action="select", option_id=t["cards"][-1]["options"][1]["id"]
        )
        chosen = pick["options"][1]["id"]
        t = await _until(st, tid, lambda t: t["status"] == "completed")
        async with st.db.session() as s:
            items = list(
                await s.scalars(
                    select(ChecklistItem)
                    .where(ChecklistItem.task_id == tid)
                    .order_by(ChecklistItem.position)
                )
            )
            cards = {c.kind: c for c in await s.scalars(select(Card).where(Card.task_id == tid))}
            orders = list(
                await s.scalars(select(GenerationOrder).where(GenerationOrder.task_id == tid))
            )
            objects = {o.id: o for o in await s.scalars(select(WorkObject))}
            media = {
                v.object_id: v.media_type or "" for v in await s.scalars(select(ObjectVersion))
            }
            steps = list(await s.scalars(select(ModelStep).where(ModelStep.task_id == tid)))

    # The checklist: budget, drafts, pick (the person's), then the request's parts, all
    # done, each with the pieces it made as artifacts.
    assert [i.status for i in items] == ["done"] * (3 + len(parts))
    assert [i.requires_confirmation for i in items] == [False, False, True] + [False] * len(parts)
    assert items[0].evidence.get("card_id") == price["card_id"]
    assert len(items[1].artifacts) == drafts and items[2].artifacts == [chosen]
    assert [len(i.artifacts) for i in items[3:]] == [len(p.prompts) for p in plan.parts]
    # One price card for the whole plan, confirmed; one select card offering the drafts.
    assert set(cards) == {"price", "select"}
    assert cards["price"].price_cents == plan.price_cents and cards["price"].status == "answered"
    assert sorted(o["id"] for o in cards["select"].options) == items[1].artifacts
    assert (cards["select"].answer or {}).get("option_id") == chosen
    # Drafts and finals exist as stored pictures; every final was made from the chosen draft.
    made = [a for i in items[3:] for a in i.artifacts]
    for a in items[1].artifacts + made:
        assert objects[a].type == "asset" and not objects[a].deleted
        assert media[a].startswith("image/"), media[a]
    assert len(orders) == drafts + finals and all(o.status == "succeeded" for o in orders)
    from_chosen = [o for o in orders if o.params.get("reference_object_id") == chosen]
    assert sorted(o.object_id or "" for o in from_chosen) == sorted(made)
    assert sum(o.price_cents for o in orders) == plan.price_cents  # within the approved plan
    # Honest replies: what is made and that it appears; never "Done."; no raw ids.
    said = [x for step in steps for x in _texts(step.response)]
    assert said and not any(RAW_ID.search(x) for x in said), said
    assert not any(x.strip().startswith(("Done", "Fertig.")) for x in said), said
    assert any(plan.name in x for x in said)

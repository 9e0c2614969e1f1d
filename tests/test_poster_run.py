"""A poster series with the offline stand-in over HTTP: the plan's
budget is approved once on a price card; the drafts run without further questions; the
finished generation wakes the task by itself and it reaches its selection checkpoint with
no "continue" message; the selection on the card is routed back by card id and the
finals complete the checklist. A follow-up days later reopens the same task."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from temporalio.client import Client

from lomo.db.models import GenerationOrder, MessageRow
from tests.helpers import eventually
from tests.runtime_support import replay_and_maybe_record
from tests.stack import Stack, running_stack

pytestmark = pytest.mark.slow


async def _task(st: Stack, tid: str) -> dict[str, Any]:
    return (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()  # type: ignore[no-any-return]


async def _open_card(st: Stack, tid: str, kind: str) -> dict[str, Any]:
    async def find() -> Any:
        t = await _task(st, tid)
        cards = [c for c in t["cards"] if c["kind"] == kind and c["status"] == "open"]
        return (cards[0], t) if cards and t["status"] == "waiting_user" else None

    try:
        card, _ = await eventually(find, within=90)
    except AssertionError as e:
        raise AssertionError(f"no open {kind} card; task: {await _task(st, tid)}") from e
    return card  # type: ignore[no-any-return]


async def _until(st: Stack, tid: str, pred: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    async def check() -> Any:
        t = await _task(st, tid)
        return t if pred(t) else None

    try:
        return await eventually(check, within=120)  # type: ignore[no-any-return]
    except AssertionError as e:
        raise AssertionError(f"task never got there: {await _task(st, tid)}") from e


# English on the embedded default, German on Postgres: each backend sees the run once.
POSTER_SERIES = pytest.mark.parametrize(
    ("db_url", "text"),
    [
        ("sqlite", "Make me a series of retro-style brand posters"),
        ("postgres", "Erstelle mir eine Serie von Markenplakaten im Retro-Stil"),
    ],
    ids=["en", "de"],
    indirect=["db_url"],
)


@POSTER_SERIES
async def test_poster_series_reaches_its_checkpoint_without_continue(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    text: str,
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        r = await st.api.post("/v1/messages", json={"text": text}, headers=st.auth)
        mid = r.json()["message_id"]

        async def routed() -> Any:
            m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
            return m["routing"] if m["routing"].get("task_id") else None

        routing = await eventually(routed, within=60)
        assert routing["decision"] == "new"
        tid = routing["task_id"]
        price = await _open_card(st, tid, "price")
        t = await _task(st, tid)
        assert t["kind"] == "persistent" and len(t["checklist"]) == 4
        r = await st.api.post(
            f"/v1/cards/{price['card_id']}/actions", json={"action": "confirm"}, headers=st.auth
        )
        assert r.status_code == 200, r.text
        # Approved once: four drafts run, finish, and wake the task, which asks by itself.
        select_card = await _open_card(st, tid, "select")
        t = await _task(st, tid)
        assert [i["status"] for i in t["checklist"]] == ["done", "done", "open", "open"]
        assert len(select_card["options"]) == 4 and len(t["artifacts"]) == 4
        assert {c["kind"] for c in t["cards"]} == {"price", "select"}
        choice = select_card["options"][1]["id"]
        r = await st.api.post(
            f"/v1/cards/{select_card['card_id']}/actions",
            json={"action": "select", "option_id": choice},
            headers=st.auth,
        )
        assert r.status_code == 200, r.text

        t = await _until(st, tid, lambda t: t["status"] == "completed")
        assert all(i["status"] == "done" for i in t["checklist"])
        assert len(t["artifacts"]) == 4 + 3
        assert [c["kind"] for c in t["cards"]].count("price") == 1  # no second question
        async with st.db.session() as s:
            n_messages = await s.scalar(
                select(func.count()).select_from(MessageRow).where(MessageRow.user_id == st.user_id)
            )
            orders = list(
                await s.scalars(select(GenerationOrder).where(GenerationOrder.task_id == tid))
            )
        assert n_messages == 1  # the person never typed "continue"
        assert len(orders) == 7 and all(o.status == "succeeded" for o in orders)
        assert sum(o.params.get("reference_object_id") == choice for o in orders) == 3

        # A follow-up reopens the same (completed, persistent) task in place.
        r = await st.api.post(
            f"/v1/tasks/{tid}/messages",
            json={
                "text": "Make the posters a bit warmer"
                if "Make" in text
                else "Mach die Plakate bitte etwas wärmer"
            },
            headers=st.auth,
        )
        assert r.status_code == 202, r.text

        # The plan's budget is used up: the extra image asks again before it is spent.
        price2 = await _open_card(st, tid, "price")
        assert price2["card_id"] != price["card_id"]
        r = await st.api.post(
            f"/v1/cards/{price2['card_id']}/actions", json={"action": "confirm"}, headers=st.auth
        )
        assert r.status_code == 200, r.text
        t = await _until(st, tid, lambda t: t["status"] == "completed" and len(t["checklist"]) == 5)
        assert len(t["artifacts"]) == 8
        assert t["language"] == ("en" if "Make" in text else "de")
        # The whole run replays against the current code (and is what tests/histories/
        # keeps: cards, checkpoints, parallel calls, waits, a reopened task).
        lang = t["language"]
        for wf_id, name in (
            (f"task:{tid}", f"task_poster_{lang}"),
            (f"main:{st.user_id}", f"main_poster_{lang}"),
            (f"memory:{st.user_id}", f"memory_poster_{lang}"),
        ):
            size = await replay_and_maybe_record(temporal_client, wf_id, name)
            assert size < 400_000, (wf_id, size)

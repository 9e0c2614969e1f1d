"""A request the offline planner must ask about, on the real stack (api and simulator over
HTTP, worker, Temporal dev server): the question comes on a card before anything is
priced, and the answer leads to the work it settles or to an end, never to a task that
waits on the person with nothing to answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.client import Client

from tests.helpers import eventually
from tests.stack import Stack, running_stack


async def _task_of(st: Stack, text: str) -> str:
    r = await st.api.post("/v1/messages", json={"text": text}, headers=st.auth)
    assert r.status_code == 202, r.text
    mid = r.json()["message_id"]

    async def routed() -> str | None:
        m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
        return m["routing"].get("task_id")

    return str(await eventually(routed, within=60))


async def _open_card(st: Stack, task_id: str, kind: str) -> dict[str, Any] | None:
    r = await st.api.get("/v1/cards", params={"task_id": task_id}, headers=st.auth)
    cards = [c for c in r.json()["cards"] if c["status"] == "open" and c["kind"] == kind]
    return cards[0] if cards else None


async def _answer(st: Stack, card: dict[str, Any], body: dict[str, str]) -> None:
    r = await st.api.post(f"/v1/cards/{card['card_id']}/actions", json=body, headers=st.auth)
    assert r.status_code == 200, r.text


async def _task(st: Stack, task_id: str) -> dict[str, Any]:
    return dict((await st.api.get(f"/v1/tasks/{task_id}", headers=st.auth)).json())


async def test_counts_that_contradict_are_asked_and_the_answer_is_planned(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        task_id = await _task_of(st, "Make a set of five stickers with owls, all seven in pastel")
        question = await eventually(lambda: _open_card(st, task_id, "select"), within=90)
        assert [o["id"] for o in question["options"]] == ["count:5", "count:7"]
        assert await _open_card(st, task_id, "price") is None  # nothing priced before
        await _answer(st, question, {"action": "select", "option_id": "count:7"})
        price = await eventually(lambda: _open_card(st, task_id, "price"), within=90)
        assert "7 stickers" in price["title"]
        t = await _task(st, task_id)
        assert [i["title"] for i in t["checklist"]][3:] == ["7 stickers"]


async def test_a_declined_question_ends_the_task(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        task_id = await _task_of(st, "Build a website for my shop and make three banners for it")
        question = await eventually(lambda: _open_card(st, task_id, "confirm"), within=90)
        assert "website" in question["title"] and "3 banners" in question["title"]
        await _answer(st, question, {"action": "reject"})

        async def ended() -> dict[str, Any] | None:
            t = await _task(st, task_id)
            return t if t["status"] == "completed" else None

        t = await eventually(ended, within=90)
        assert [i["status"] for i in t["checklist"]] == ["skipped"] and not t["artifacts"]

"""The poster series end to end over HTTP with the offline stand-in: posters started in
main, a cat video inserted in between, the selection made on the poster task's own card,
and days later "the posters from last time a bit warmer" lands in the original poster
task, which reopens and does it, with no duplicate task. Time passing is the tasks'
activity moved back three days (the router reads recency from the DB)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from temporalio.client import Client

from lomo.db.models import Task
from tests.helpers import eventually
from tests.stack import Stack, running_stack

pytestmark = pytest.mark.slow


async def _say(st: Stack, text: str) -> str:
    r = await st.api.post("/v1/messages", json={"text": text}, headers=st.auth)
    assert r.status_code == 202, r.text
    return str(r.json()["message_id"])


async def _routing(st: Stack, mid: str) -> dict[str, Any]:
    async def routed() -> Any:
        m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
        return m["routing"] if m["routing"].get("decision") else None

    return await eventually(routed, within=60)  # type: ignore[no-any-return]


async def _task(st: Stack, tid: str) -> dict[str, Any]:
    return (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()  # type: ignore[no-any-return]


async def _until(st: Stack, tid: str, pred: Any, within: float = 120) -> dict[str, Any]:
    async def check() -> Any:
        t = await _task(st, tid)
        return t if pred(t) else None

    try:
        return await eventually(check, within=within)  # type: ignore[no-any-return]
    except AssertionError as e:
        raise AssertionError(f"task {tid} never got there: {await _task(st, tid)}") from e


def _open(kind: str) -> Any:
    def pred(t: dict[str, Any]) -> bool:
        return t["status"] == "waiting_user" and any(
            c["kind"] == kind and c["status"] == "open" for c in t["cards"]
        )

    return pred


def _card(t: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in t["cards"] if c["kind"] == kind and c["status"] == "open")


async def _answer(st: Stack, card: dict[str, Any], **body: str) -> None:
    r = await st.api.post(f"/v1/cards/{card['card_id']}/actions", json=body, headers=st.auth)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_article_scenario_end_to_end(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        # Yesterday's cat picture.
        cat = await _routing(st, await _say(st, "Generate an image of a red tabby cat"))
        await _until(st, cat["task_id"], lambda t: t["status"] == "completed")

        # The poster series starts in main and becomes a persistent task.
        posters = await _routing(
            st, await _say(st, "Make me a series of retro-style brand posters")
        )
        assert posters["decision"] == "new"
        ptask = posters["task_id"]
        t = await _until(st, ptask, _open("price"))
        await _answer(st, _card(t, "price"), action="confirm")

        # In between: a video from the cat picture, its own task.
        video = await _routing(
            st, await _say(st, "Turn yesterday's cat picture into a five-second video")
        )
        assert video["decision"] == "lightweight" and video["task_id"] != ptask

        # The poster task reaches its selection by itself; the choice goes back by card id.
        t = await _until(st, ptask, _open("select"))
        choice = _card(t, "select")
        await _answer(st, choice, action="select", option_id=choice["options"][1]["id"])
        vt = await _until(st, video["task_id"], lambda t: t["status"] == "completed")
        assert len(vt["artifacts"]) == 1
        await _until(st, ptask, lambda t: t["status"] == "completed")

        async with st.db.session() as s:  # a few days later
            for task in await s.scalars(select(Task).where(Task.user_id == st.user_id)):
                task.updated_at = task.updated_at - timedelta(days=3)
            before = await s.scalar(select(func.count()).where(Task.user_id == st.user_id))

        later = await _routing(st, await _say(st, "Make the posters from last time a bit warmer"))
        assert later["decision"] == "existing" and later["task_id"] == ptask
        t = await _until(st, ptask, _open("price"))  # the approved budget is used up: it asks
        await _answer(st, _card(t, "price"), action="confirm")
        t = await _until(
            st, ptask, lambda t: t["status"] == "completed" and len(t["checklist"]) == 5
        )
        assert len(t["artifacts"]) == 4 + 3 + 1
        async with st.db.session() as s:
            after = await s.scalar(select(func.count()).where(Task.user_id == st.user_id))
        assert after == before  # no duplicate task

"""Every paid result reaches the person, through the real api, worker, simulator and the
offline model: with the free amount at 0 every picture asks its price first. The same
picture asked for again goes to the finished task, which is promoted after two follow-ups
and so has no plan; a confirmed price there must still end with the picture presented in
a reply, never with a silent `waiting_user`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from temporalio.client import Client

from tests.helpers import eventually
from tests.stack import Stack, running_stack

CAT = "Generate an image of a red tabby cat"
ASKS = 4


async def _events(st: Stack) -> list[dict[str, Any]]:
    r = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
    return [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: ")]


async def _routed(st: Stack, message_id: str) -> str:
    async def task_id() -> str:
        r = await st.api.get(f"/v1/messages/{message_id}", headers=st.auth)
        return str(r.json()["routing"].get("task_id") or "")

    return str(await eventually(task_id, within=60))


async def _made(st: Stack, task_id: str, n: int) -> dict[str, Any]:
    """Confirm the task's price cards until it holds `n` pictures and has stopped working."""

    async def settled() -> dict[str, Any] | None:
        t = (await st.api.get(f"/v1/tasks/{task_id}", headers=st.auth)).json()
        for card in t["cards"]:
            if card["kind"] == "price" and card["status"] == "open":
                url = f"/v1/cards/{card['card_id']}/actions"
                await st.api.post(url, json={"action": "confirm"}, headers=st.auth)
        idle = t["status"] in ("completed", "waiting_user") and not t["waiting_on"]
        return t if idle and len(t["artifacts"]) >= n else None

    result: dict[str, Any] = await eventually(settled, within=90, interval=0.3)
    return result


def _shown(events: list[dict[str, Any]], task_id: str, object_id: str) -> bool:
    """After the picture was made, the task replied: the runtime presenting it, or the
    model saying it is there (the picture is among the task's results)."""
    made = min((e["seq"] for e in events if e["data"].get("object_id") == object_id), default=10**9)
    return any(
        e["type"] == "task.reply" and e["data"]["task_id"] == task_id and e["seq"] > made
        for e in events
    )


async def test_a_confirmed_price_ends_with_the_picture_presented(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        r = await st.api.put(
            "/v1/budget/settings", json={"free_confirm_amount": 0}, headers=st.auth
        )
        assert r.status_code == 200
        tasks = []
        for n in range(1, ASKS + 1):
            body = {"text": CAT, "client_message_id": f"cat-{n}"}
            r = await st.api.post("/v1/messages", json=body, headers=st.auth)
            assert r.status_code == 202, r.text
            task_id = await _routed(st, r.json()["message_id"])
            tasks.append(task_id)
            t = await _made(st, task_id, n)
            open_cards = [c for c in t["cards"] if c["status"] == "open"]
            events = await _events(st)
            unshown = [o for o in t["artifacts"] if not _shown(events, task_id, o)]
            # Presented with a reply, or a card that says what the agent asks.
            assert not unshown or any(c["title"] for c in open_cards), (
                n,
                t["kind"],
                t["status"],
                [e["data"] for e in events if e["type"] == "task.reply"][-2:],
            )
        assert len(set(tasks)) == 1  # the follow-ups went to the finished picture task
        t = (await st.api.get(f"/v1/tasks/{tasks[0]}", headers=st.auth)).json()
        assert t["kind"] == "persistent"  # promoted: the asks after it found no plan

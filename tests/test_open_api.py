"""Paid calls arriving through the open API are confirmed one by one: a
task driven by an API token asks on a price card for every paid call, even below the
person's free-confirm amount; the same request from the person's app runs freely."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tests.helpers import eventually
from tests.stack import Stack, running_stack

CAT = {"text": "Generate an image of a red tabby cat"}


async def _task_of(st: Stack, mid: str, headers: dict[str, str]) -> str:
    async def routed() -> Any:
        m = (await st.api.get(f"/v1/messages/{mid}", headers=headers)).json()
        return m["routing"].get("task_id")

    return str(await eventually(routed, within=60))


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_open_api_calls_are_confirmed_one_by_one(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        r = await st.api.post("/v1/tokens", json={"name": "my script"}, headers=st.auth)
        assert r.status_code == 201 and r.json()["kind"] == "api"
        api = {"Authorization": f"Bearer {r.json()['token']}"}
        r = await st.api.post("/v1/tokens", json={}, headers=api)
        assert r.status_code == 403  # a program cannot mint more tokens

        mid = (await st.api.post("/v1/messages", json=CAT, headers=api)).json()["message_id"]
        tid = await _task_of(st, mid, api)

        async def asks() -> Any:
            t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
            cards = [c for c in t["cards"] if c["kind"] == "price" and c["status"] == "open"]
            return cards[0] if cards and t["status"] == "waiting_user" else None

        card = await eventually(asks, within=60)
        assert card["price"]["amount_cents"] < 50  # below the free amount, asked anyway
        r = await st.api.post(
            f"/v1/cards/{card['card_id']}/actions", json={"action": "confirm"}, headers=st.auth
        )
        assert r.status_code == 200, r.text

        async def done(task_id: str) -> Any:
            t = (await st.api.get(f"/v1/tasks/{task_id}", headers=st.auth)).json()
            return t if t["status"] == "completed" else None

        t = await eventually(lambda: done(tid), within=60)
        assert len(t["artifacts"]) == 1

        # A request from the person's app runs within the free amount, unasked.
        parrot = {"text": "Paint a picture of a green parrot"}  # a colour, yet new work
        mid = (await st.api.post("/v1/messages", json=parrot, headers=st.auth)).json()["message_id"]
        tid2 = await _task_of(st, mid, st.auth)
        assert tid2 != tid, (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
        t2 = await eventually(lambda: done(tid2), within=60)
        assert len(t2["artifacts"]) == 1 and not [c for c in t2["cards"] if c["kind"] == "price"]

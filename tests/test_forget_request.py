"""'Forget that our brand colour is blue' through the one entry with the offline stand-in:
the request becomes a small task that asks on a forget card; only the person's
confirmation runs the memory service's cascade, and the task then says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tests.helpers import eventually
from tests.stack import Stack, running_stack


async def _memories(st: Stack) -> list[dict[str, Any]]:
    r = await st.api.get("/v1/memory", headers=st.auth)
    assert r.status_code == 200, r.text
    return r.json()["memories"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_forget_request_asks_then_forgets(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, embedder="fake"
    ) as st:
        await st.api.post(
            "/v1/messages", json={"text": "Our brand's main colour is blue."}, headers=st.auth
        )

        async def remembered() -> Any:
            return [m for m in await _memories(st) if "blue" in m["content"].lower()]

        await eventually(remembered, within=60)
        r = await st.api.post(
            "/v1/messages", json={"text": "Forget that our brand colour is blue"}, headers=st.auth
        )
        mid = r.json()["message_id"]

        async def card() -> Any:
            m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
            tid = m["routing"].get("task_id")
            if not tid:
                return None
            t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
            open_ = [c for c in t["cards"] if c["kind"] == "forget" and c["status"] == "open"]
            return (tid, open_[0]) if open_ and t["status"] == "waiting_user" else None

        tid, forget_card = await eventually(card, within=60)
        assert await remembered()  # nothing is forgotten before the person confirms
        r = await st.api.post(
            f"/v1/cards/{forget_card['card_id']}/actions",
            json={"action": "confirm"},
            headers=st.auth,
        )
        assert r.status_code == 200, r.text

        async def done() -> Any:
            t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
            return t if t["status"] == "completed" else None

        await eventually(done, within=60)
        try:
            await eventually(lambda: _gone(st), within=30)
        except AssertionError as e:
            raise AssertionError(str(await _memories(st))) from e
        # The next task's context carries neither the fact nor the request that quoted it.
        r = await st.api.post(
            "/v1/messages", json={"text": "Generate an image of our brand mascot"}, headers=st.auth
        )
        nid = r.json()["message_id"]

        async def next_task() -> Any:
            m = (await st.api.get(f"/v1/messages/{nid}", headers=st.auth)).json()
            tid2 = m["routing"].get("task_id")
            if not tid2:
                return None
            t = (await st.api.get(f"/v1/tasks/{tid2}", headers=st.auth)).json()
            return tid2 if t["status"] == "completed" else None

        tid2 = await eventually(next_task, within=60)
        ctx = (await st.api.get(f"/v1/tasks/{tid2}/context", headers=st.auth)).json()
        leaks = [x["name"] for x in ctx["layers"] if "blue" in x["text"].lower()]
        assert leaks == [], [(x["name"], x["text"][-400:]) for x in ctx["layers"]]


async def _gone(st: Stack) -> bool:
    return not [
        m
        for m in await _memories(st)
        if "blue" in m["content"].lower() and m["status"] not in ("forgotten", "deleted")
    ]

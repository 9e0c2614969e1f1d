"""A newcomer's first plain messages through the real stack (api, worker, Temporal dev
server, simulator) with the offline model: each acts by what it means, and every reply is
honest (no "Done." before the piece exists, no raw ids)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from temporalio.client import Client

from tests.helpers import eventually
from tests.stack import Stack, running_stack
from tests.test_slice import run_cat_slice

RAW_ID = re.compile(r"\b(?:obj|tsk|ord|crd|chk)_[0-9a-z]+\b")


async def _events(st: Stack) -> list[dict[str, Any]]:
    r = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
    return [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: ")]


async def _replies_of(st: Stack, task_id: str) -> list[str]:
    return [
        e["data"]["text"]
        for e in await _events(st)
        if e["type"] == "task.reply" and e["data"].get("task_id") == task_id
    ]


async def test_newcomer_requests_act_and_replies_are_honest(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        logo = await run_cat_slice(st, "Design a logo for my bakery")
        said = await _replies_of(st, logo["task_id"])
        print("\n".join(said))
        assert said[0].startswith("I'm making the image “Design a logo for my bakery”")
        assert said[-1].startswith("Here is your image")
        assert not any(RAW_ID.search(s) or s.startswith("Done") for s in said), said

        jingle = await run_cat_slice(st, "Can you create a short jingle for my podcast intro?")
        blob = await st.api.get(f"/v1/objects/{jingle['artifacts'][0]}/blob", headers=st.auth)
        assert blob.headers["content-type"].startswith("audio/"), blob.headers
        assert (await _replies_of(st, jingle["task_id"]))[-1].startswith("Here is your audio")

        r = await st.api.post("/v1/messages", json={"text": "Hallo!"}, headers=st.auth)
        mid = r.json()["message_id"]

        async def answered() -> Any:
            m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
            return m if m["routing"].get("decision") else None

        assert (await eventually(answered))["routing"]["decision"] == "answer"
        jobs = (await st.sim.get("/jobs")).json()["jobs"]
        assert len(jobs) == 2  # one upstream job per request, none for the greeting

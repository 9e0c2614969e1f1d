"""A confirmed price leads to the work it approved or to a line saying why not, whatever
the task's previous turn left: three turns of one task over real HTTP, a real worker, the
real dev server and the simulator's lost submit answer (`submit_timeout_after_create`).

1. a picture is made; 2. the next request meets a lost submit answer (the upstream made
the job, its answer never came): the adopted job's picture is shown when the upstream
honours idempotency keys, else an honest line; 3. with `free_confirm_amount` 0 the next
request gets a price card, the person confirms it while submits still lose their answer,
and the task says what came of it instead of waiting on the person with nothing made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tests.helpers import eventually
from tests.stack import Stack, running_stack
from tests.test_slice import run_cat_slice


async def _events(st: Stack) -> list[dict[str, Any]]:
    r = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
    assert r.status_code == 200
    out, seq = [], 0
    for line in r.text.splitlines():
        if line.startswith("id: "):
            seq = int(line[4:])
        elif line.startswith("data: "):
            out.append({**json.loads(line[6:]), "seq": seq})
    return out


async def _task(st: Stack, task_id: str) -> dict[str, Any]:
    r = await st.api.get(f"/v1/tasks/{task_id}", headers=st.auth)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def _settled(st: Stack, task_id: str, after_seq: int) -> list[dict[str, Any]]:
    """The task's events after `after_seq`, once the task rests (not running, no job) and
    its last status follows a reply of the runtime or the model."""
    t = await _task(st, task_id)
    if t["status"] in ("running", "waiting_generation"):
        return []
    new = [e for e in await _events(st) if e["seq"] > after_seq]
    replies = [e for e in new if e["type"] == "task.reply"]
    return new if replies else []


async def _say(st: Stack, task_id: str, text: str) -> int:
    """Send a message to the task; the event sequence before it."""
    seq = max(e["seq"] for e in await _events(st))
    r = await st.api.post(f"/v1/tasks/{task_id}/messages", json={"text": text}, headers=st.auth)
    assert r.status_code == 202, r.text
    return int(seq)


@pytest.mark.parametrize(
    ("db_url", "idempotent"),
    [("sqlite", False), ("postgres", False), ("sqlite", True)],
    indirect=["db_url"],
)
async def test_a_confirm_after_a_lost_submit_leads_to_work_or_a_line(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    idempotent: bool,
) -> None:
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        generation_upstream_idempotent=idempotent,
        generation_submit_timeout_seconds=1.0,
    ) as st:
        task = await run_cat_slice(st, "Generate an image of a red tabby cat")
        tid, first = task["task_id"], task["artifacts"]

        # Turn 2: the upstream makes the job and its answer is lost.
        faults = {"submit_timeout_after_create": True, "submit_timeout_seconds": 3}
        assert (await st.sim.post("/sim/faults", json=faults)).status_code == 200
        seq = await _say(st, tid, "Make it a bit warmer")
        turn2 = await eventually(lambda: _settled(st, tid, seq), within=90)
        t2 = await _task(st, tid)
        shown = [e for e in turn2 if e["type"] == "task.reply" and e["data"].get("object_ids")]
        if idempotent:
            # The job the key made is adopted and its picture shown, charged once.
            assert shown and set(shown[-1]["data"]["object_ids"]) <= set(t2["artifacts"])
            assert len(t2["artifacts"]) > len(first)
        else:
            said = [e["data"]["text"] for e in turn2 if e["type"] == "task.reply"]
            assert not shown and any("could not be made" in t for t in said), said

        # Turn 3: a price card, confirmed while submits still lose their answer.
        r = await st.api.put(
            "/v1/budget/settings", json={"free_confirm_amount": 0}, headers=st.auth
        )
        assert r.status_code == 200, r.text
        before = await _task(st, tid)
        seq = await _say(st, tid, "Make it a bit brighter")

        async def price_card() -> Any:
            r = await st.api.get(
                "/v1/cards", params={"status": "open", "task_id": tid}, headers=st.auth
            )
            return [c for c in r.json()["cards"] if c["kind"] == "price"] or None

        card = (await eventually(price_card, within=60))[0]
        r = await st.api.post(
            f"/v1/cards/{card['card_id']}/actions", json={"action": "confirm"}, headers=st.auth
        )
        assert r.status_code == 200, r.text
        answered = max(e["seq"] for e in await _events(st))
        turn3 = await eventually(lambda: _settled(st, tid, answered), within=90)
        t3 = await _task(st, tid)
        made = len(t3["artifacts"]) > len(before["artifacts"])
        said = [e["data"]["text"] for e in turn3 if e["type"] == "task.reply"]
        # Not the hang: waiting on the person with the card answered and nothing to say.
        assert made or said, (t3, turn3)
        if not idempotent:
            assert not made and any("could not be made" in t for t in said), said
        open_cards = [c["card_id"] for c in t3["cards"] if c["status"] == "open"]
        assert card["card_id"] not in open_cards
        assert seq < answered

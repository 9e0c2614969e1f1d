"""The article's short film (§10.3) end to end with the offline stand-in, over HTTP only:
the person sends a storyboard; the agent writes it as a document, builds the flow
(storyboard → six shots → six clips, music → edit) and runs it; one price card for the
whole film; the run produces fourteen paid results in dependency order; the task is woken
when the card is due and when the film is finished, and says where it is. Both histories
replay (recorded as tests/histories/task_film*.json and flow_film_task*.json: the task
starting its run as a child, the run signalling the task)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import select
from temporalio.client import Client

from lomo.db.models import GenerationOrder
from tests.flow_support import wait_status
from tests.helpers import eventually
from tests.runtime_support import replay_and_maybe_record
from tests.stack import Stack, running_stack

STORYBOARD = (
    "Make a short film from this storyboard: 1. A lighthouse at dawn. 2. Gulls over the "
    "cliffs. 3. A fishing boat leaves the harbour. 4. Storm clouds gather. 5. The boat "
    "returns through the rain. 6. The lighthouse beam at night."
)


async def _replies(st: Stack, task_id: str) -> list[str]:
    r = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
    events = [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: ")]
    return [
        str(e["data"].get("text"))
        for e in events
        if e["type"] == "task.reply" and e["data"].get("task_id") == task_id
    ]


async def test_short_film_from_a_storyboard(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        r = await st.api.post("/v1/messages", json={"text": STORYBOARD}, headers=st.auth)
        mid = r.json()["message_id"]

        async def routed() -> Any:
            m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
            return m["routing"] if m["routing"].get("task_id") else None

        task_id = (await eventually(routed, within=60))["task_id"]

        async def price_card() -> Any:
            r = await st.api.get("/v1/cards", params={"task_id": task_id}, headers=st.auth)
            cards = [c for c in r.json()["cards"] if c["kind"] == "price"]
            return cards[0] if cards else None

        card = await eventually(price_card, within=90)
        run_id = card["payload"]["flow_run"]
        assert card["price"]["amount_cents"] == 6 * 4 + 6 * 40 + 5 + 40  # the whole film
        flow_id = card["payload"]["flow_id"]
        flow = (await st.api.get(f"/v1/objects/{flow_id}", headers=st.auth)).json()
        nodes = flow["content"]["nodes"]
        assert nodes["edit"]["inputs"] == [*(f"clip{n}" for n in range(1, 7)), "music"]
        assert nodes["shot5"]["params"]["prompt"] == "The boat returns through the rain"

        async def asked() -> Any:
            return [t for t in await _replies(st, task_id) if "confirm the price" in t]

        await eventually(asked, within=60)  # woken because the run needs the person
        r = await st.api.post(
            f"/v1/cards/{card['card_id']}/actions", json={"action": "confirm"}, headers=st.auth
        )
        assert r.status_code == 200, r.text
        view = await wait_status(st, run_id, "succeeded", "failed", within=120)
        assert view["status"] == "succeeded", view
        assert view["progress"]["done"] == view["progress"]["total"] == 15
        edit = view["nodes"]["edit"]["object_id"]
        obj = (await st.api.get(f"/v1/objects/{edit}", headers=st.auth)).json()
        assert obj["content"]["media_type"] == "video/mp4"

        async def finished() -> Any:
            return [t for t in await _replies(st, task_id) if "film is ready" in t]

        done = await eventually(finished, within=60)  # woken at the end, names the film
        assert edit not in done[-1] and "obj_" not in done[-1]  # named, not an id

        async def completed() -> Any:
            t = (await st.api.get(f"/v1/tasks/{task_id}", headers=st.auth)).json()
            return t if t["status"] == "completed" else None

        # Made and shown, the film's task is complete: it does not wait on the person
        # with nothing to answer. Its one step carries the final cut.
        task = await eventually(completed, within=60)
        assert [(i["status"], i["artifacts"]) for i in task["checklist"]] == [("done", [edit])]
        async with st.db.session() as s:
            orders = list(await s.scalars(select(GenerationOrder)))
        assert len(orders) == 14 and all(o.status == "succeeded" for o in orders)
        r = await st.api.get("/v1/cards", params={"task_id": task_id}, headers=st.auth)
        assert [c["kind"] for c in r.json()["cards"]].count("price") == 1
        await replay_and_maybe_record(temporal_client, f"task:{task_id}", "task_film")
        await replay_and_maybe_record(temporal_client, f"flowrun:{run_id}", "flow_film_task")

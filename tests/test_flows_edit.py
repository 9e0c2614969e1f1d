"""The person edits a flow while it runs (one node at a time, so the edit lands between
nodes): the running node finishes on its old definition and is marked stale, a node not
yet started runs on the new one, the owning task's context says so, and the next run
redoes exactly the stale part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select
from temporalio.client import Client

from flows.runs import progress_lines
from lomo.db.models import GenerationOrder
from tests.flow_support import (
    confirm_price,
    create_flow,
    film,
    orders,
    owning_task,
    price_cards,
    run_view,
    start_run,
    wait_status,
)
from tests.helpers import eventually
from tests.stack import running_stack


def shot(prompt: str) -> dict[str, object]:
    return {"type": "video", "params": {"prompt": prompt, "duration_s": 2}, "inputs": []}


async def test_an_edit_mid_run_reaches_nodes_not_started_and_marks_running_ones_stale(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, flow_max_parallel=1
    ) as st:
        await st.sim.post("/sim/faults", json={"latency_scale": 8})  # ~2 s per clip
        task_id = await owning_task(st.db, st.user_id)
        flow_id = await create_flow(st, film(4))
        run_id = await start_run(st, flow_id, task_id)
        await confirm_price(st, run_id)

        async def shot1_running() -> bool:
            nodes = (await run_view(st, run_id))["nodes"]
            return nodes["shot1"]["status"] == "running" and nodes["shot2"]["status"] == "pending"

        await eventually(shot1_running, within=30, interval=0.05)
        r = await st.api.patch(
            f"/v1/objects/{flow_id}",
            json={
                "base_version": 1,
                "nodes": {"shot1": shot("shot 1, rainy"), "shot3": shot("shot 3, at dawn")},
            },
            headers=st.auth,
        )
        assert r.status_code == 200, r.text
        view = await wait_status(st, run_id, "succeeded", "failed")
        assert view["status"] == "succeeded", view
        nodes = view["nodes"]
        assert nodes["shot1"]["stale"] and nodes["shot1"]["version"] == 1
        assert nodes["shot3"]["version"] == 2 and not nodes["shot3"]["stale"]
        assert nodes["edit"]["stale"]  # cut from a stale clip
        assert not nodes["shot2"]["stale"] and not nodes["shot4"]["stale"]
        async with st.db.session() as s:
            prompts = {o.params["prompt"] for o in await s.scalars(select(GenerationOrder))}
            lines = await progress_lines(s, task_id)
        assert "shot 3, at dawn" in prompts and "shot 1, rainy" not in prompts
        assert "stale" in lines[0] and "shot1" in lines[0] and "5 of 5 nodes done" in lines[0]
        assert await orders(st.db, st.user_id) == 5

        again = await start_run(st, flow_id, task_id)
        await confirm_price(st, again)
        view = await wait_status(st, again, "succeeded", "failed")
        assert view["status"] == "succeeded" and view["progress"]["reused"] == 3
        assert await orders(st.db, st.user_id) == 7  # shot1 on its new prompt, the edit
        assert not any(v["stale"] for v in view["nodes"].values())


async def test_edits_after_the_price_card_ask_only_for_what_it_did_not_cover(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """With nothing free, the run's one card approved each node it priced, up to its
    price. Mid-run the person changes a shot not yet started (same price: runs without a
    question) and adds a shot that the edit now cuts in (not priced: its own card, which
    the run waits for while the rest goes on)."""
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, flow_max_parallel=1
    ) as st:
        r = await st.api.put(
            "/v1/budget/settings", json={"free_confirm_amount": 0}, headers=st.auth
        )
        assert r.status_code == 200
        await st.sim.post("/sim/faults", json={"latency_scale": 8})
        task_id = await owning_task(st.db, st.user_id)
        flow_id = await create_flow(st, film(3))
        run_id = await start_run(st, flow_id, task_id)
        first = await confirm_price(st, run_id)

        async def shot1_running() -> bool:
            return (await run_view(st, run_id))["nodes"]["shot1"]["status"] == "running"

        await eventually(shot1_running, within=30, interval=0.05)
        edit = {
            "type": "edit",
            "params": {"prompt": "final cut"},
            "inputs": ["shot1", "shot2", "shot3", "shot4"],
        }
        r = await st.api.patch(
            f"/v1/objects/{flow_id}",
            json={
                "base_version": 1,
                "nodes": {
                    "shot3": shot("shot 3, in the fog"),
                    "shot4": shot("shot 4"),
                    "edit": edit,
                },
            },
            headers=st.auth,
        )
        assert r.status_code == 200, r.text

        async def node_card() -> dict[str, Any] | None:
            cards = [c for c in await price_cards(st) if c["card_id"] != first["card_id"]]
            return cards[0] if cards else None

        card = await eventually(node_card, within=60)
        assert card["price"] == {"amount_cents": 40, "currency": "EUR"}
        assert card["payload"]["call_id"] == f"flow:{run_id}:shot4:1"
        assert (await run_view(st, run_id))["status"] == "running"
        r = await st.api.post(
            f"/v1/cards/{card['card_id']}/actions", json={"action": "confirm"}, headers=st.auth
        )
        assert r.status_code == 200, r.text
        view = await wait_status(st, run_id, "succeeded", "failed")
        assert view["status"] == "succeeded", view
        assert view["nodes"]["shot3"]["version"] == 2 and view["progress"]["total"] == 5
        assert await orders(st.db, st.user_id) == 5
        assert len(await price_cards(st)) == 2  # the run's, and the added shot's

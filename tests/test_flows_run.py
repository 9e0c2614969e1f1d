"""Flow runs on a real worker, the real simulator over HTTP and a real dev server: one
price card for the whole graph, change propagation by content hash (orders counted), a
failed node blocking only its descendants and a resume after the fix."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client

from tests.flow_support import (
    confirm_price,
    create_flow,
    film,
    orders,
    owning_task,
    price_cards,
    start_run,
    wait_status,
)
from tests.runtime_support import replay_and_maybe_record
from tests.stack import running_stack


async def test_editing_one_shot_regenerates_that_shot_and_the_edit_only(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        task_id = await owning_task(st.db, st.user_id)
        flow_id = await create_flow(st, film(10))
        run_id = await start_run(st, flow_id, task_id)
        card = await confirm_price(st, run_id)
        assert card["price"]["amount_cents"] == 11 * 40  # ten clips and the edit, one card
        view = await wait_status(st, run_id, "succeeded", "failed")
        assert view["status"] == "succeeded", view
        assert view["progress"] == {
            "total": 11,
            "done": 11,
            "reused": 0,
            "running": 0,
            "failed": 0,
            "blocked": 0,
        }
        assert await orders(st.db, st.user_id) == 11
        first = {n: v["object_id"] for n, v in view["nodes"].items()}
        # Replays against the current code (recorded for test_replay with
        # LOMO_RECORD_HISTORIES=1); references only, so a node costs little history.
        size = await replay_and_maybe_record(temporal_client, f"flowrun:{run_id}", "flow_film")
        assert size / 11 < 16_000, size  # measured: about 12.7 KB of JSON per node

        r = await st.api.patch(
            f"/v1/objects/{flow_id}",
            json={
                "base_version": 1,
                "nodes": {
                    "shot3": {
                        "type": "video",
                        "params": {"prompt": "shot 3, at night", "duration_s": 2},
                        "inputs": [],
                    }
                },
            },
            headers=st.auth,
        )
        assert r.status_code == 200, r.text
        again = await start_run(st, flow_id, task_id)
        card = await confirm_price(st, again)
        assert card["price"]["amount_cents"] == 2 * 40  # only what must run is priced
        view = await wait_status(st, again, "succeeded", "failed")
        assert view["status"] == "succeeded", view
        assert await orders(st.db, st.user_id) == 13  # shot3 and the edit, nothing else
        changed = {n for n, v in view["nodes"].items() if v["object_id"] != first[n]}
        assert changed == {"shot3", "edit"}
        assert view["progress"]["reused"] == 9
        assert len(await price_cards(st)) == 2  # one per run, never one per node

        # Nothing changed: a third run reuses everything, asks nothing, orders nothing.
        third = await start_run(st, flow_id, task_id)
        view = await wait_status(st, third, "succeeded", "failed")
        assert view["progress"]["reused"] == 11 and view["price"]["amount_cents"] == 0
        assert await orders(st.db, st.user_id) == 13
        assert len(await price_cards(st)) == 2


async def test_a_failed_node_blocks_only_its_descendants_and_resumes_after_the_fix(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        task_id = await owning_task(st.db, st.user_id)
        nodes = {
            "a": {"type": "image", "params": {"prompt": "a"}, "inputs": []},
            # 60 s is outside the model's 2-10 s: refused at its start, nothing spent.
            "b": {"type": "video", "params": {"prompt": "b", "duration_s": 60}, "inputs": ["a"]},
            "c": {"type": "video", "params": {"prompt": "c", "duration_s": 2}, "inputs": ["b"]},
            "d": {"type": "audio", "params": {"prompt": "d", "duration_s": 3}, "inputs": []},
        }
        flow_id = await create_flow(st, {"nodes": nodes})
        run_id = await start_run(st, flow_id, task_id)
        view = await wait_status(st, run_id, "succeeded", "failed")
        assert view["status"] == "failed"
        assert view["card_id"] is None  # 4 + 5 cents (b is refused, costs nothing): free
        status = {n: v["status"] for n, v in view["nodes"].items()}
        assert status == {"a": "done", "b": "failed", "c": "blocked", "d": "done"}
        assert "2-10 s" in view["nodes"]["b"]["error"] and "b:" in view["reason"]
        assert await orders(st.db, st.user_id) == 2

        fixed = {**nodes["b"], "params": {"prompt": "b", "duration_s": 4}}
        r = await st.api.patch(
            f"/v1/objects/{flow_id}",
            json={"base_version": 1, "nodes": {"b": fixed}},
            headers=st.auth,
        )
        assert r.status_code == 200, r.text
        r = await st.api.post(f"/v1/flow-runs/{run_id}/resume", headers=st.auth)
        assert r.status_code == 202, r.text
        assert r.json()["attempt"] == 2
        r = await st.api.post(f"/v1/flow-runs/{run_id}/resume", headers=st.auth)
        assert r.status_code == 409  # still active
        card = await confirm_price(st, run_id)
        assert card["price"]["amount_cents"] == 2 * 40  # b and c; a and d are reused
        view = await wait_status(st, run_id, "succeeded", "failed")
        assert view["status"] == "succeeded", view
        assert view["progress"]["reused"] == 2
        assert await orders(st.db, st.user_id) == 4
        await replay_and_maybe_record(temporal_client, f"flowrun:{run_id}", "flow_resume")

"""A storyboard change re-makes only what it touches, through the real workflow, worker,
simulator and dev server: five shots name their characters; one character's description
changes; the two shots that show her and the edit over all shots are made again (their
orders counted), three shots are reused, and the one price card lists the re-made nodes,
why, and their price."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from temporalio.client import Client

from lomo.db.models import GenerationOrder
from tests.flow_support import (
    confirm_price,
    create_flow,
    owning_task,
    price_cards,
    start_run,
    storyboard,
    storyboard_flow,
    wait_status,
)
from tests.stack import running_stack

GREEN = "a fisherwoman in a green coat, her braid cut short"


async def test_a_changed_character_re_makes_only_the_shots_that_show_her(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    # Every paid run asks: the person sees the re-make list even when it is cheap.
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, free_confirm_cents=0
    ) as st:
        task_id = await owning_task(st.db, st.user_id)
        r = await st.api.post(
            "/v1/objects",
            json={"type": "document", "name": "Storyboard", "content": {"text": storyboard()}},
            headers=st.auth,
        )
        assert r.status_code == 201, r.text
        doc_id = r.json()["object_id"]
        flow_id = await create_flow(st, storyboard_flow(doc_id))
        run_id = await start_run(st, flow_id, task_id)
        card = await confirm_price(st, run_id)
        assert card["price"]["amount_cents"] == 5 * 4 + 40  # a first run: everything
        assert card["title"] == "Flow run: 6 paid nodes, 0.60 EUR in total"
        view = await wait_status(st, run_id, "succeeded", "failed")
        assert view["status"] == "succeeded", view
        first = {n: v["object_id"] for n, v in view["nodes"].items()}

        r = await st.api.put(
            f"/v1/objects/{doc_id}",
            json={"base_version": 1, "content": {"text": storyboard(mara=GREEN)}},
            headers=st.auth,
        )
        assert r.status_code == 200, r.text
        again = await start_run(st, flow_id, task_id)
        card = await confirm_price(st, again)
        assert card["price"]["amount_cents"] == 2 * 4 + 40  # two shots and the edit
        assert card["title"] == (
            "Re-make 3 of 6 paid nodes for 0.48 EUR in total; 3 kept as they are. "
            "shot2 and shot4 show Mara, whose description changed. "
            "edit uses the re-made shot2 and shot4."
        )
        remade = {r["node"]: r["why"] for r in card["payload"]["remake"]}
        assert list(remade) == ["shot2", "shot4", "edit"]
        assert remade["shot2"]["parts"] == ["Mara.description"]
        assert card["payload"]["kept"] == ["shot1", "shot3", "shot5"]
        assert sorted(card["payload"]["calls"].values()) == [4, 4, 40]
        view = await wait_status(st, again, "succeeded", "failed")
        assert view["status"] == "succeeded", view
        assert view["progress"]["reused"] == 3
        changed = {n for n, v in view["nodes"].items() if v["object_id"] != first[n]}
        assert changed == {"shot2", "shot4", "edit"}
        async with st.db.session() as s:
            orders = list(await s.scalars(select(GenerationOrder)))
        new = [o for o in orders if again in o.idempotency_key]
        assert sorted(o.kind for o in new) == ["image", "image", "video"]  # two shots, the edit
        assert len(orders) == 6 + 3
        # The re-made shots were asked with Mara's new description, and only what they use.
        shot2 = next(o for o in new if ":shot2:" in o.idempotency_key)
        assert GREEN in shot2.params["prompt"] and "Tom" not in shot2.params["prompt"]
        assert len(await price_cards(st)) == 2  # one per run

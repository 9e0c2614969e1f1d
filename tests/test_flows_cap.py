"""A flow run must fit in one workflow history: a flow has at most MAX_FLOW_NODES nodes
(lomo/limits.py). One over is refused with 422 `flow_too_large` when it is saved (create,
replace, node edit) and when a run starts (a flow stored before the limit); one at the
limit runs to the end, with its history far under Temporal's marks. A run parked on its
price card, which grows by its re-reads however small the flow, continues as new (the test
server suggests it after 400 events) and still runs when the card is answered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from lomo.db.models import ObjectVersion, WorkObject
from lomo.ids import new_id
from lomo.limits import MAX_FLOW_NODES
from tests.flow_support import (
    confirm_price,
    create_flow,
    film,
    owning_task,
    price_cards,
    start_run,
    wait_status,
)
from tests.helpers import eventually
from tests.runtime_support import replay_and_maybe_record
from tests.stack import running_stack

TEMPORAL_WARN_EVENTS = 10_240  # where Temporal starts warning about a history's length


def _flow(doc: str, n: int) -> dict[str, Any]:
    nodes = {
        f"n{i:03d}": {"type": "document", "params": {"object_id": doc}, "inputs": []}
        for i in range(n)
    }
    return {"nodes": nodes}


def _refused(r: httpx.Response) -> None:
    assert r.status_code == 422, (r.status_code, r.text)
    body = r.json()
    assert body["error"] == "flow_too_large", body
    assert body["limit_nodes"] == MAX_FLOW_NODES
    assert f"at most {MAX_FLOW_NODES} nodes" in body["detail"]


async def test_a_flow_over_the_cap_is_refused_and_one_at_the_cap_runs(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, flow_max_parallel=20
    ) as st:
        r = await st.api.post(
            "/v1/objects",
            json={"type": "document", "name": "notes", "content": {"text": "a"}},
            headers=st.auth,
        )
        doc = r.json()["object_id"]
        over = {"type": "flow", "name": "big", "content": _flow(doc, MAX_FLOW_NODES + 1)}
        _refused(await st.api.post("/v1/objects", json=over, headers=st.auth))

        flow_id = await create_flow(st, _flow(doc, MAX_FLOW_NODES), name="at the cap")
        one_more = {"x": {"type": "document", "params": {"object_id": doc}, "inputs": []}}
        r = await st.api.patch(
            f"/v1/objects/{flow_id}", json={"base_version": 1, "nodes": one_more}, headers=st.auth
        )
        _refused(r)
        r = await st.api.put(
            f"/v1/objects/{flow_id}",
            json={"base_version": 1, "content": _flow(doc, MAX_FLOW_NODES + 1)},
            headers=st.auth,
        )
        _refused(r)
        names = [
            o["name"] for o in (await st.api.get("/v1/objects", headers=st.auth)).json()["objects"]
        ]
        assert "big" not in names

        # Stored before the limit existed: refused when a run starts, nothing started.
        old = new_id("obj")
        async with st.db.session() as s:
            s.add(WorkObject(id=old, user_id=st.user_id, type="flow", name="old", version=1))
            await s.flush()
            s.add(
                ObjectVersion(
                    object_id=old,
                    version=1,
                    content=_flow(doc, MAX_FLOW_NODES + 1),
                    created_by="user",
                )
            )
        task_id = await owning_task(st.db, st.user_id)
        r = await st.api.post(f"/v1/objects/{old}/runs", json={"task_id": task_id}, headers=st.auth)
        _refused(r)
        assert (await st.api.get(f"/v1/objects/{old}/runs", headers=st.auth)).json()["runs"] == []

        run_id = await start_run(st, flow_id, task_id)
        view = await wait_status(st, run_id, "succeeded", "failed", within=300)
        assert view["status"] == "succeeded", view["reason"]
        assert view["progress"]["done"] == MAX_FLOW_NODES
        history = await temporal_client.get_workflow_handle(f"flowrun:{run_id}").fetch_history()
        events = len(history.events)
        print(f"{MAX_FLOW_NODES} document nodes: {events} history events")
        assert events < TEMPORAL_WARN_EVENTS


async def test_a_run_parked_on_its_price_card_rolls_over_and_still_runs(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        # Re-read at once, every time (no back-off): the history grows to the server's
        # continue-as-new suggestion within seconds.
        card_wait_seconds=0.05,
        card_wait_max_seconds=0.05,
    ) as st:
        task_id = await owning_task(st.db, st.user_id)
        run_id = await start_run(st, await create_flow(st, film(3)), task_id)
        await wait_status(st, run_id, "waiting_price")
        workflow_id = f"flowrun:{run_id}"

        async def rolled_over() -> int | None:
            runs = [
                r async for r in temporal_client.list_workflows(f'WorkflowId = "{workflow_id}"')
            ]
            return len(runs) if len(runs) >= 2 else None

        await eventually(rolled_over, within=120, interval=0.5)
        card = await confirm_price(st, run_id)
        assert card["price"]["amount_cents"] == 4 * 40
        view = await wait_status(st, run_id, "succeeded", "failed", within=120)
        assert view["status"] == "succeeded", view["reason"]
        assert len(await price_cards(st)) == 1  # every run of the workflow found the one card
        runs = [r async for r in temporal_client.list_workflows(f'WorkflowId = "{workflow_id}"')]
        for r in runs:
            history = await temporal_client.get_workflow_handle(
                workflow_id, run_id=r.run_id
            ).fetch_history()
            assert len(history.events) < 1_000, (r.run_id, len(history.events))
        await replay_and_maybe_record(temporal_client, workflow_id, "flow_price_rollover")

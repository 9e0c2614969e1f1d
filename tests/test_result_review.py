"""Results are checked before they are presented: "a bit warmer" yields a picture whose
mean red minus blue, computed here from the stored bytes, is higher than the picture it
revised; a result that misses its brief is made again exactly once (each order charged
once), and a second miss is presented with a note saying what is off."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from sqlalchemy import select
from temporalio.client import Client

from lomo.db.models import GenerationOrder
from money.models import LedgerEntry
from tests.helpers import eventually
from tests.stack import Stack, running_stack

FOX = "Draw a fox sitting in the snow"
WARMER = "Make it a bit warmer"


def warmth(png: bytes) -> float:
    px = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.float64)
    return float(px[..., 0].mean() - px[..., 2].mean())


async def _say(st: Stack, text: str, artifacts: int) -> dict[str, Any]:
    """Send, then wait until the message's task rests with `artifacts` results."""
    mid = (await st.api.post("/v1/messages", json={"text": text}, headers=st.auth)).json()[
        "message_id"
    ]

    async def settled() -> Any:
        m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
        tid = m["routing"].get("task_id")
        if not tid:
            return None
        t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
        resting = t["status"] in ("completed", "waiting_user", "failed")
        return t if resting and len(t["artifacts"]) >= artifacts else None

    try:
        return dict(await eventually(settled, within=90))
    except AssertionError:
        m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
        r = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
        raise AssertionError(f"{text!r} did not settle: {m}\n{r.text[-6000:]}") from None


async def _blob(st: Stack, object_id: str) -> bytes:
    r = await st.api.get(f"/v1/objects/{object_id}/blob", headers=st.auth)
    assert r.status_code == 200
    return r.content


async def _replies(st: Stack, task_id: str) -> list[str]:
    r = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
    events = [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: ")]
    return [
        e["data"]["text"]
        for e in events
        if e["type"] == "task.reply" and e["data"].get("task_id") == task_id
    ]


async def test_a_bit_warmer_is_warmer(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        first = await _say(st, FOX, 1)
        second = await _say(st, WARMER, 2)
        assert second["task_id"] == first["task_id"]  # the change went to the fox
        before, after = first["artifacts"][0], second["artifacts"][-1]
        w0, w1 = warmth(await _blob(st, before)), warmth(await _blob(st, after))
        print(f"\nwarmth (mean R-B): chosen {w0:.1f}, after 'a bit warmer' {w1:.1f}")
        assert w1 > w0 + 10


async def test_a_missed_brief_is_made_again_once(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        first = await _say(st, FOX, 1)
        await st.sim.post("/sim/faults", json={"ignore_brief_jobs": 1})
        second = await _say(st, WARMER, 3)
        task_id = second["task_id"]
        async with st.db.session() as s:
            orders = list(
                await s.scalars(
                    select(GenerationOrder)
                    .where(GenerationOrder.task_id == task_id)
                    .order_by(GenerationOrder.created_at)
                )
            )
            settles = list(await s.scalars(select(LedgerEntry).where(LedgerEntry.kind == "settle")))
        # The fox, the revision that ignored the brief, and exactly one remake.
        assert len(orders) == 3 and all(o.status == "succeeded" for o in orders)
        assert sorted(e.order_id for e in settles) == sorted(o.id for o in orders)  # once each
        w = [warmth(await _blob(st, str(o.object_id))) for o in orders]
        assert abs(w[1] - w[0]) < 5 and w[2] > w[0] + 10, w  # missed, then met
        replies = await _replies(st, task_id)
        assert any("misses the brief" in r and "not warmer" in r for r in replies), replies
        assert first["artifacts"][0] == str(orders[0].object_id)

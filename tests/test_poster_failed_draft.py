"""A poster draft whose order fails (an unclear submit against an upstream without
idempotency keys: refunded, never resubmitted by the platform) must not leave the task
talking about drafts "still being generated" until the no-progress limit stops it, as a
scenario run on a crashing Postgres saw in both poster rows: the agent orders the failed
draft again and the series reaches its selection card.

The fault is injected at its exact point: the upstream POST of draft 3 breaks after it was
sent (httpx.ReadTimeout, outcome unclear), so `GenerateTool` fails and refunds that order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from temporalio.client import Client

from lomo.db.models import GenerationOrder
from money.orders import UNCLEAR_SUBMIT
from tests.helpers import eventually
from tests.stack import Stack, running_stack
from tests.test_poster_run import POSTER_SERIES

pytestmark = pytest.mark.slow


async def _task(st: Stack, tid: str) -> dict[str, Any]:
    t: dict[str, Any] = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
    return t


async def _open_card(st: Stack, tid: str, kind: str) -> dict[str, Any]:
    async def find() -> Any:
        t = await _task(st, tid)
        # A stopped task never gets there: fail at once, with why.
        assert t["status"] != "stopped", f"task stopped: {t['status_reason']!r}"
        cards = [c for c in t["cards"] if c["kind"] == kind and c["status"] == "open"]
        return cards[0] if cards and t["status"] == "waiting_user" else None

    card: dict[str, Any] = await eventually(find, within=90)
    return card


@POSTER_SERIES
async def test_a_failed_draft_is_ordered_again_not_waited_on_until_the_limit(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    text: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_post = httpx.AsyncClient.post
    broken: list[str] = []

    async def post(self: httpx.AsyncClient, url: Any, *a: Any, **kw: Any) -> httpx.Response:
        prompt = str(((kw.get("json") or {}).get("params") or {}).get("prompt", ""))
        if str(url).endswith("/jobs") and "draft 3," in prompt and not broken:
            broken.append(prompt)
            raise httpx.ReadTimeout("the connection broke before the answer")
        return await real_post(self, url, *a, **kw)

    monkeypatch.setattr(httpx.AsyncClient, "post", post)
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        generation_upstream_idempotent=False,  # else the retry adopts the job: no failed draft
    ) as st:
        r = await st.api.post("/v1/messages", json={"text": text}, headers=st.auth)
        mid = r.json()["message_id"]

        async def routed() -> Any:
            m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
            return m["routing"].get("task_id")

        tid = await eventually(routed, within=60)
        price = await _open_card(st, tid, "price")
        r = await st.api.post(
            f"/v1/cards/{price['card_id']}/actions", json={"action": "confirm"}, headers=st.auth
        )
        assert r.status_code == 200, r.text
        select_card = await _open_card(st, tid, "select")
        t = await _task(st, tid)
        assert broken, "the fault was never injected"
        assert len(select_card["options"]) == 4 and len(t["artifacts"]) == 4
        async with st.db.session() as s:
            orders = list(
                await s.scalars(select(GenerationOrder).where(GenerationOrder.task_id == tid))
            )
        failed = [o for o in orders if o.status == "failed"]
        assert [o.error for o in failed] == [UNCLEAR_SUBMIT]
        assert sorted(o.status for o in orders) == ["failed"] + ["succeeded"] * 4
        again = [o for o in orders if o.params["prompt"] == broken[0]]
        assert len(again) == 2  # the same draft, ordered again as a new call
        assert [c["kind"] for c in t["cards"]].count("price") == 1  # within the plan budget

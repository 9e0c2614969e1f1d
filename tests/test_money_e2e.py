"""End to end on the real stack (api + simulator over HTTP, worker, Temporal dev server,
a scripted model): a poster plan approved with a budget through its price card runs its
drafts without further questions and asks again when a step would exceed the budget."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.client import Client

from llm.types import ModelResponse, ToolUseBlock, Usage
from lomo.db.engine import Database
from lomo.db.models import Card, GenerationOrder
from money.ledger import ledger_problems
from money.models import Approval, LedgerEntry
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import start_task, text
from tests.stack import running_stack


def _tools(*uses: tuple[str, dict[str, Any]]) -> ModelResponse:
    return ModelResponse(
        content=[
            ToolUseBlock(id=f"toolu_{i}_{name}", name=name, input=args)
            for i, (name, args) in enumerate(uses)
        ],
        stop_reason="tool_use",
        usage=Usage(input_tokens=10, output_tokens=5),
    )


async def _open_price_card(db: Database, task_id: str) -> Card | None:
    async with db.session() as s:
        return await s.scalar(
            select(Card).where(Card.task_id == task_id, Card.kind == "price", Card.status == "open")
        )


async def _status(st: Any, task_id: str, *wanted: str) -> bool:
    t = (await st.api.get(f"/v1/tasks/{task_id}", headers=st.auth)).json()
    return t["status"] in wanted


async def _say(st: Any, task_id: str, words: str) -> None:
    r = await st.api.post(f"/v1/tasks/{task_id}/messages", json={"text": words}, headers=st.auth)
    assert r.status_code == 202, r.text


async def test_poster_plan_budget_end_to_end(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    draft = ("generate_image", {"prompt": "poster draft"})
    provider = ScriptedProvider(
        [
            # A question to the person (the price card) ends the turn: no reply step.
            _tools(("request_budget", {"amount_cents": 12, "purpose": "three poster drafts"})),
            _tools(draft, draft, draft),  # 3 x 4 cents: within the plan, no question
            text("Three drafts are on their way."),
            _tools(draft),  # a fourth would exceed the plan: asks again
        ]
    )
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        r = await st.api.put(
            "/v1/budget/settings", json={"free_confirm_amount": 0}, headers=st.auth
        )
        assert r.status_code == 200  # without the plan every paid call would ask
        task_id, handle = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            "make three poster drafts",
            kind="persistent",
            generation_wait_seconds=2,
            card_wait_seconds=5,
        )
        plan_card = await eventually(lambda: _open_price_card(st.db, task_id), within=60)
        assert plan_card.payload.get("plan") is True and plan_card.price_cents == 12
        await eventually(lambda: _status(st, task_id, "waiting_user"), within=30)
        async with st.db.session() as s:
            assert await s.scalar(select(GenerationOrder)) is None  # nothing spent unasked
        r = await st.api.post(
            f"/v1/cards/{plan_card.id}/actions", json={"action": "confirm"}, headers=st.auth
        )
        assert r.status_code == 200
        tb = (await st.api.get(f"/v1/tasks/{task_id}/budget", headers=st.auth)).json()
        assert tb["plan_budget"] == {"approved": 12, "used": 0}
        await _say(st, task_id, "go ahead")

        async def three_done() -> bool:
            async with st.db.session() as s:
                orders = list(await s.scalars(select(GenerationOrder)))
            return len(orders) == 3 and all(o.object_id for o in orders)

        await eventually(three_done, within=60)
        assert await _open_price_card(st.db, task_id) is None  # no question for the drafts
        await eventually(lambda: _status(st, task_id, "waiting_user"), within=30)
        await _say(st, task_id, "one more please")
        over = await eventually(lambda: _open_price_card(st.db, task_id), within=60)
        assert over.id != plan_card.id and over.price_cents == 4
        assert "exceeds the approved plan budget" in over.payload["reason"]
        r = await st.api.post(
            f"/v1/cards/{over.id}/actions", json={"action": "reject"}, headers=st.auth
        )
        assert r.status_code == 200
        await eventually(lambda: _status(st, task_id, "waiting_user"), within=30)
        assert (await st.api.post(f"/v1/tasks/{task_id}/stop", headers=st.auth)).status_code == 200
        await handle.result()
        async with st.db.session() as s:
            orders = list(await s.scalars(select(GenerationOrder)))
            approvals = list(await s.scalars(select(Approval)))
            assert await ledger_problems(s, st.user_id) == []
        assert [o.status for o in orders] == ["succeeded"] * 3
        assert [(a.kind, a.amount_cents, a.source) for a in approvals] == [("plan", 12, "card")]
        assert len((await st.sim.get("/jobs")).json()["jobs"]) == 3
        budget = (await st.api.get("/v1/budget", headers=st.auth)).json()
        assert (budget["balance"], budget["reserved"], budget["spent"]) == (1988, 0, 12)
        tb = (await st.api.get(f"/v1/tasks/{task_id}/budget", headers=st.auth)).json()
        assert tb["plan_budget"] == {"approved": 12, "used": 12}
        assert provider.remaining == 0


@pytest.mark.parametrize(
    ("fail_rate", "final", "entry"), [(0.0, "succeeded", "settle"), (1.0, "failed", "refund")]
)
async def test_a_stopped_task_still_settles_its_job_once_and_is_not_woken(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    fail_rate: float,
    final: str,
    entry: str,
) -> None:
    provider = ScriptedProvider(
        [_tools(("generate_image", {"prompt": "poster"})), text("Generating.")]
    )
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        # ~4 s job, with duplicated callbacks on top.
        await st.sim.post(
            "/sim/faults",
            json={"latency_scale": 40, "fail_rate": fail_rate, "duplicate_callbacks": 3},
        )
        task_id, handle = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            "a poster",
            kind="persistent",
            generation_wait_seconds=1,
        )
        await eventually(lambda: _status(st, task_id, "waiting_generation"), within=60)
        assert (await st.api.post(f"/v1/tasks/{task_id}/stop", headers=st.auth)).status_code == 200

        async def ended() -> GenerationOrder | None:
            async with st.db.session() as s:
                o = await s.scalar(select(GenerationOrder))
                done = o is not None and o.status == final
                return o if done and (o.object_id or final == "failed") else None

        order = await eventually(ended, within=60)
        assert await handle.result() == "stopped"
        await asyncio.sleep(1.0)  # late duplicates land; nothing may change any more
        async with st.db.session() as s:
            assert await ledger_problems(s, st.user_id) == []
            kinds = list(
                await s.scalars(
                    select(LedgerEntry.kind)
                    .where(LedgerEntry.user_id == st.user_id)
                    .order_by(LedgerEntry.id)
                )
            )
        assert kinds == ["deposit", "reserve", entry]
        assert len(provider.requests) == 2  # the stopped task was not woken
        assert len((await st.sim.get("/jobs")).json()["jobs"]) == 1
        t = (await st.api.get(f"/v1/tasks/{task_id}", headers=st.auth)).json()
        assert t["status"] == "stopped"
        if final == "succeeded":
            assert t["artifacts"] == [order.object_id]  # the asset is kept

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
from lomo.db.models import Card, Event, GenerationOrder
from money.catalogue import cancel_charge
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
            # The drafts' end wakes the model (a task without a checklist has no plan
            # step to go on with): it shows them.
            text("Here are the three drafts."),
            _tools(draft),  # a fourth would exceed the plan: asks again
            # The person declines it: the declined call made no job, so the model hears
            # the refusal and says so.
            text("Alright, no fourth draft."),
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


@pytest.mark.parametrize("started", [False, True], ids=["before_start", "after_start"])
async def test_a_stopped_task_cancels_its_job_and_says_what_it_cost(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    started: bool,
) -> None:
    """The person stops a task while its picture is being made: the job is cancelled
    upstream, charged nothing before it started (the catalogue's partial price after),
    the task is not woken, and its reply says what was cancelled and what it cost."""
    provider = ScriptedProvider(
        [_tools(("generate_image", {"prompt": "poster"})), text("Generating.")]
    )
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        # A slow job (about 10 s per step before it starts, 1 s after), duplicated callbacks.
        scale = 40 if started else 400
        await st.sim.post("/sim/faults", json={"latency_scale": scale, "duplicate_callbacks": 3})
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
        if started:
            await eventually(lambda: _progress(st), within=60, interval=0.05)
        assert (await st.api.post(f"/v1/tasks/{task_id}/stop", headers=st.auth)).status_code == 200
        assert await handle.result() == "stopped"
        await asyncio.sleep(1.0)  # late duplicates land; nothing may change any more
        async with st.db.session() as s:
            assert await ledger_problems(s, st.user_id) == []
            order = await s.scalar(select(GenerationOrder))
            entries = list(
                await s.execute(
                    select(LedgerEntry.kind, LedgerEntry.amount_cents)
                    .where(LedgerEntry.user_id == st.user_id)
                    .order_by(LedgerEntry.id)
                )
            )
            replies = list(
                await s.scalars(
                    select(Event.data).where(
                        Event.user_id == st.user_id, Event.type == "task.reply"
                    )
                )
            )
        assert order is not None and order.status == "cancelled" and order.object_id is None
        charge = cancel_charge(4, order.progress)
        closing = [("settle", charge), ("refund", 4 - charge)] if started else [("refund", 4)]
        assert [tuple(e) for e in entries] == [("deposit", 2000), ("reserve", 4), *closing]
        (job,) = (await st.sim.get("/jobs")).json()["jobs"]
        assert job["status"] == "cancelled"
        budget = (await st.api.get("/v1/budget", headers=st.auth)).json()
        assert (budget["spent"], budget["reserved"]) == (charge, 0)
        assert len(provider.requests) == 2  # the stopped task was not woken
        t = (await st.api.get(f"/v1/tasks/{task_id}", headers=st.auth)).json()
        assert t["status"] == "stopped" and t["artifacts"] == []
        said = [r["text"] for r in replies if r.get("by") == "runtime"]
        word = "before it started" if not started else "EUR charged"
        assert len(said) == 1 and "Cancelled the image" in said[0] and word in said[0], said
        print(f"ledger after the stop: {entries}; reply: {said[0]!r}")


async def _progress(st: Any) -> bool:
    async with st.db.session() as s:
        o = await s.scalar(select(GenerationOrder))
        return o is not None and o.progress > 0

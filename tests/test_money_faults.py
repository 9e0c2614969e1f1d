"""Upstream faults and races against the simulator's knobs, at the tool/activity level.
For each: upstream job count, order count and ledger entries asserted exactly; the money
fixture's teardown runs the ledger invariant check."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from lomo.db.engine import Database
from lomo.db.models import Event, GenerationOrder
from lomo.signing import SIGNATURE_HEADER, sign
from money.models import LedgerEntry
from money.orders import UNCLEAR_SUBMIT
from tests.helpers import eventually
from tests.test_money import Money, money_env
from tools.generation import GenerateTool


@pytest.fixture
async def money(tmp_path: Path, db_url: str, temporal_server: str) -> AsyncIterator[Money]:
    async with money_env(tmp_path, db_url, temporal_server) as m:
        yield m


@pytest.mark.parametrize(
    "faults",
    [{"duplicate_callbacks": 5}, {"out_of_order": True}, {"drop_callbacks": True}],
    ids=["duplicates_x5", "out_of_order", "dropped_recovered_by_poll"],
)
async def test_callback_faults_charge_once(money: Money, faults: dict[str, Any]) -> None:
    # Slower jobs (0.25 s per step) so the first callback never beats the job id's commit.
    faults = {**faults, "latency_scale": 10}
    assert (await money.sim.post("/sim/faults", json=faults)).status_code == 200
    res = await money.image(money.ctx())
    assert res.order_id
    dropped = bool(faults.get("drop_callbacks"))
    # Callbacks alone must settle (no poll), unless they are dropped: then the poll does.
    assert await money.settled(res.order_id, poll=dropped) == "succeeded"
    # Let every late duplicate / stale progress event land before counting.
    job = (await money.jobs())[0]
    await asyncio.sleep(0.5)
    assert job["status"] == "succeeded" and len(await money.jobs()) == 1
    assert await money.count(GenerationOrder) == 1
    assert await money.entries() == [("deposit", 2000), ("reserve", 4), ("settle", 4)]
    assert await money.account() == (1996, 0, 4, 2000)
    assert await money.count(Event, Event.type == "generation.completed") == 1
    progress = await money.count(Event, Event.type == "generation.progress")
    if faults.get("duplicate_callbacks"):  # progress reaches the UI as events, no model here
        assert progress == 3  # 0.25, 0.5, 0.75 once each despite 5 duplicates of each
    if faults.get("out_of_order"):
        assert progress == 0  # all held back until after the terminal event: stale, ignored
    async with money.db.session() as s:
        o = await s.get(GenerationOrder, res.order_id)
        assert o is not None and (o.status, o.progress) == ("succeeded", 1.0)


async def test_submit_timeout_after_create_is_failed_refunded_never_resubmitted(
    tmp_path: Path, db_url: str, temporal_server: str
) -> None:
    # An upstream without idempotency keys (an idempotent one: tests/test_money_resend.py).
    async with money_env(
        tmp_path,
        db_url,
        temporal_server,
        generation_submit_timeout_seconds=0.5,
        generation_upstream_idempotent=False,
    ) as m:
        await m.sim.post(
            "/sim/faults",
            json={"submit_timeout_after_create": True, "submit_timeout_seconds": 3},
        )
        ctx = m.ctx()
        res = await m.image(ctx)
        # The stated rule: unclear outcome → the order fails and is refunded in full.
        assert res.status == "error" and res.result["error"] == UNCLEAR_SUBMIT
        assert res.order_id is None  # nothing for the task to wait on
        assert await m.entries() == [("deposit", 2000), ("reserve", 4), ("refund", 4)]
        again = await m.image(ctx)  # a retry of the same call: no second upstream job
        assert again.status == "error"
        jobs = await eventually(
            lambda: _finished_jobs(m), within=20
        )  # the upstream did create the job and runs it to its end
        assert len(jobs) == 1 and len(await m.jobs()) == 1
        assert await m.count(GenerationOrder) == 1
        async with m.db.session() as s:
            o = await s.scalar(select(GenerationOrder))
            assert o is not None and o.status == "failed"

        # Its callbacks (all of them, before and after the refund) changed no money.
        await asyncio.sleep(0.5)
        assert await m.entries() == [("deposit", 2000), ("reserve", 4), ("refund", 4)]
        assert await m.account() == (2000, 0, 0, 2000)


async def _finished_jobs(m: Money) -> list[dict[str, Any]]:
    jobs = await m.jobs()
    return jobs if jobs and all(j["status"] in ("succeeded", "failed") for j in jobs) else []


async def test_twenty_paid_calls_racing_on_one_budget_never_overspend(
    tmp_path: Path, db_url: str, temporal_server: str
) -> None:
    # 50 cents for twenty 4-cent calls: exactly 12 fit. Free thresholds are wide open so
    # only the balance decides.
    async with money_env(
        tmp_path,
        db_url,
        temporal_server,
        initial_credit_cents=50,
        free_confirm_cents=1000,
        daily_free_cents=100_000,
    ) as m:
        dbs = [Database(m.settings.resolved_database_url) for _ in range(4)]  # four "workers"
        try:
            results = await asyncio.gather(
                *(
                    GenerateTool(m.deps(dbs[i % 4]), "image").run(m.ctx(), {"prompt": f"cat {i}"})
                    for i in range(20)
                )
            )
        finally:
            for d in dbs:
                await d.dispose()
        done = [r for r in results if r.status == "done"]
        refused = [r for r in results if r.status == "needs_credit"]
        assert len(done) == 12 and len(refused) == 8, [r.result for r in results]
        assert all("insufficient balance" in r.result["reason"] for r in refused)
        balance, reserved, spent, deposits = await m.account()
        assert (balance, reserved + spent, deposits) == (2, 48, 50)  # settling meanwhile
        for r in done:
            assert await m.settled(str(r.order_id)) == "succeeded"
        assert await m.account() == (2, 0, 48, 50)  # no reservation left dangling
        assert len(await m.jobs()) == 12 and await m.count(GenerationOrder) == 12
        assert await m.count(LedgerEntry, LedgerEntry.kind == "settle") == 12


async def test_twenty_racing_calls_against_a_plan_budget_ask_for_the_rest(money: Money) -> None:
    await money.api.put("/v1/budget/settings", json={"free_confirm_amount": 0}, headers=money.auth)
    r = await money.api.post(
        f"/v1/tasks/{money.task_id}/budget", json={"amount_cents": 40}, headers=money.auth
    )
    assert r.status_code == 200
    results = await asyncio.gather(*(money.image(money.ctx()) for _ in range(20)))
    statuses = sorted(r.status for r in results)
    assert statuses == ["done"] * 10 + ["needs_confirmation"] * 10
    for r in results:
        if r.order_id:
            assert await money.settled(r.order_id) == "succeeded"
    assert await money.account() == (1960, 0, 40, 2000)
    assert len(await money.jobs()) == 10


async def test_the_same_call_from_two_workers_charges_once(money: Money) -> None:
    ctx = money.ctx()
    other = Database(money.settings.resolved_database_url)
    try:
        a, b = await asyncio.gather(
            GenerateTool(money.deps(), "image").run(ctx, {"prompt": "a cat"}),
            GenerateTool(money.deps(other), "image").run(ctx, {"prompt": "a cat"}),
        )
    finally:
        await other.dispose()
    assert a.status == b.status == "done" and a.order_id == b.order_id
    assert await money.settled(str(a.order_id)) == "succeeded"
    assert len(await money.jobs()) == 1 and await money.count(GenerationOrder) == 1
    assert await money.entries() == [("deposit", 2000), ("reserve", 4), ("settle", 4)]


async def test_concurrent_duplicate_callbacks_complete_and_settle_once(money: Money) -> None:
    """The simulator sends duplicates one after another; here ten terminal reports and
    stale progress reports for one job arrive at the api at the same time."""
    await money.sim.post("/sim/faults", json={"drop_callbacks": True})
    res = await money.image(money.ctx())
    assert res.order_id
    job = (await eventually(lambda: _finished_jobs(money), within=20))[0]
    key = res.order_id

    def signed(ev: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        body = json.dumps(ev).encode()
        secret = money.settings.callback_secret.get_secret_value()
        return body, {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body)}

    final = {**job, "seq": 5, "event_id": "e-final"}
    stale = [
        {**job, "status": "running", "progress": p, "seq": i} for i, p in ((2, 0.25), (3, 0.5))
    ]
    reports = [final] * 10 + stale * 3
    responses = await asyncio.gather(
        *(
            money.api.post("/v1/generation/callbacks", content=b, headers=h)
            for b, h in map(signed, reports)
        )
    )
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    # Exactly one of the ten terminal reports changed the order (a stale report may still
    # land first, depending on arrival; it can never land after the terminal one).
    assert sum(r.json()["changed"] for r in responses[:10]) == 1
    forged = await money.api.post(
        "/v1/generation/callbacks",
        content=json.dumps({**job, "status": "failed"}).encode(),
        headers={"Content-Type": "application/json", SIGNATURE_HEADER: "0" * 64},
    )
    assert forged.status_code == 401
    async with money.db.session() as s:
        o = await s.get(GenerationOrder, key)
        assert o is not None and (o.status, o.progress) == ("succeeded", 1.0)
    assert await money.count(Event, Event.type == "generation.completed") == 1
    assert await money.entries() == [("deposit", 2000), ("reserve", 4), ("settle", 4)]
    assert len(await money.jobs()) == 1

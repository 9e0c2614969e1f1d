"""Cancelling upstream jobs against the real simulator over HTTP and the real api
(callbacks), at the activity level: a cancel before the job started costs nothing, one
after the catalogue's partial price; a completion racing the cancel (delivered just after
it, just before it, duplicated, out of order) leaves exactly one terminal state and one
closing of the reservation. The money fixture's teardown runs the ledger invariant check.

A job whose id was never stored is found again by its idempotency key and re-attached
(`GET /jobs?idempotency_key=`), for a cancel as for a submit whose answer was lost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import select

from activities.generation import GenerationActivities
from activities.types import OrderRef
from lomo.db.models import Event, GenerationOrder
from lomo.signing import SIGNATURE_HEADER, sign
from money.catalogue import cancel_charge
from tests.helpers import eventually
from tests.test_money import Money, money_env


@pytest.fixture
async def money(tmp_path: Path, db_url: str, temporal_server: str) -> AsyncIterator[Money]:
    async with money_env(tmp_path, db_url, temporal_server) as m:
        # Slow jobs (about 1 s per step): a cancel lands before the start or mid-way.
        await m.sim.post("/sim/faults", json={"latency_scale": 40})
        yield m


async def _order(m: Money, order_id: str) -> GenerationOrder:
    async with m.db.session() as s:
        o = await s.get(GenerationOrder, order_id, populate_existing=True)
        assert o is not None
        return o


async def _submitted(m: Money) -> str:
    res = await m.image(m.ctx())
    assert res.status == "done" and res.order_id, res.result
    return res.order_id


async def _started(m: Money, order_id: str) -> None:
    """Wait until the upstream reported progress (the job started)."""

    async def running() -> bool:
        return (await _order(m, order_id)).progress > 0

    await eventually(running, within=20, interval=0.05)


async def _cancel(m: Money, order_id: str) -> str:
    st = await GenerationActivities(m.deps()).cancel_generation(OrderRef(order_id))
    return st.status


async def _settle_down(m: Money) -> None:
    """Let every callback still on its way land before the books are read."""
    await asyncio.sleep(1.0)


async def test_cancel_before_start_costs_nothing(money: Money) -> None:
    order_id = await _submitted(money)
    assert await _cancel(money, order_id) == "cancelled"
    (job,) = await money.jobs()
    assert (job["status"], job["progress"]) == ("cancelled", 0.0)
    await _settle_down(money)
    assert await money.entries() == [("deposit", 2000), ("reserve", 4), ("refund", 4)]
    assert await money.account() == (2000, 0, 0, 2000)
    budget = (await money.api.get("/v1/budget", headers=money.auth)).json()
    assert (budget["spent"], budget["reserved"], budget["balance"]) == (0, 0, 2000)
    assert await _cancel(money, order_id) == "cancelled"  # asked again: nothing more
    assert len(await money.entries()) == 3


async def test_cancel_after_start_settles_the_partial_price(money: Money) -> None:
    order_id = await _submitted(money)
    await _started(money, order_id)
    assert await _cancel(money, order_id) == "cancelled"
    o = await _order(money, order_id)
    (job,) = await money.jobs()
    assert job["status"] == "cancelled" and o.progress == job["progress"] > 0
    charge = cancel_charge(4, o.progress)
    assert 0 < charge < 4
    await _settle_down(money)
    assert await money.entries() == [
        ("deposit", 2000),
        ("reserve", 4),
        ("settle", charge),
        ("refund", 4 - charge),
    ]
    assert await money.account() == (2000 - charge, 0, charge, 2000)
    assert o.object_id is None
    # The part charged counts against today's free amount; the part given back does not.
    budget = (await money.api.get("/v1/budget", headers=money.auth)).json()
    assert (budget["spent"], budget["daily_free_used"]) == (charge, charge)


@pytest.mark.parametrize("faults", [{}, {"duplicate_callbacks": 3, "out_of_order": True}])
async def test_completion_delivered_right_after_the_cancel_changes_nothing(
    money: Money, faults: dict[str, Any]
) -> None:
    """The vendor's completion was already on its way: it arrives after the cancel's
    answer (duplicated, with held-back progress shuffled after it). Cancelled stays."""
    await money.sim.post("/sim/faults", json={"cancel_race": "complete_after", **faults})
    order_id = await _submitted(money)
    if faults:
        await asyncio.sleep(1.5)  # progress is held back: started by now, not reported
    else:
        await _started(money, order_id)
    assert await _cancel(money, order_id) == "cancelled"
    before = await money.entries()
    await _settle_down(money)
    o = await _order(money, order_id)
    assert (o.status, o.object_id, o.result_url) == ("cancelled", None, None)
    assert await money.entries() == before
    closing = [e for e in before if e[0] in ("settle", "refund")]
    assert sum(a for _, a in closing) == 4 and len(closing) in (1, 2)
    assert dict(closing).get("settle", 0) == cancel_charge(4, o.progress)
    assert await money.count(Event, Event.type == "generation.completed") == 1
    # The same completion once more, straight to the api, signed: acknowledged, unchanged.
    late = {
        "job_id": o.upstream_job_id,
        "status": "succeeded",
        "progress": 1.0,
        "seq": 99,
        "idempotency_key": o.idempotency_key,
        "result_url": f"{money.settings.resolved_sim_url}/files/x.png",
    }
    body = json.dumps(late).encode()
    secret = money.settings.callback_secret.get_secret_value()
    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body)}
    r = await money.api.post("/v1/generation/callbacks", content=body, headers=headers)
    assert r.json() == {"ok": True, "changed": False}
    assert await money.entries() == before
    print(await _timeline(money, order_id))


async def _timeline(m: Money, order_id: str) -> str:
    """The person's events for the order and the books, in order: what a reader of
    `GET /v1/events` saw during the race."""
    async with m.db.session() as s:
        rows = await s.scalars(select(Event).where(Event.user_id == m.user_id).order_by(Event.seq))
        lines = [
            f"{e.seq:>3} {e.type:<22} "
            + ", ".join(f"{k}={v}" for k, v in e.data.items() if k != "order_id")
            for e in rows
            if e.data.get("order_id") in (order_id, None) or e.type == "budget.changed"
        ]
    (job,) = await m.jobs()
    return "\n".join([*lines, f"upstream job: {job}", f"ledger: {await m.entries()}"])


async def test_completion_delivered_right_before_the_cancel_wins(money: Money) -> None:
    """The job ended as the cancel arrived: the cancel finds it done and changes nothing;
    the person is charged the full price once and keeps the result."""
    await money.sim.post("/sim/faults", json={"cancel_race": "complete_before"})
    order_id = await _submitted(money)
    assert await _cancel(money, order_id) == "succeeded"
    await _settle_down(money)
    assert await _cancel(money, order_id) == "succeeded"
    assert await money.entries() == [("deposit", 2000), ("reserve", 4), ("settle", 4)]
    assert await money.count(Event, Event.type == "generation.completed") == 1
    st = await GenerationActivities(money.deps()).collect_generation(OrderRef(order_id))
    assert st.object_id


async def test_cancel_after_completion_changes_nothing(money: Money) -> None:
    await money.sim.post("/sim/faults", json={"latency_scale": 1, "duplicate_callbacks": 2})
    order_id = await _submitted(money)
    assert await money.settled(order_id) == "succeeded"
    assert await _cancel(money, order_id) == "succeeded"
    (job,) = await money.jobs()
    assert job["status"] == "succeeded"
    await _settle_down(money)
    assert await money.entries() == [("deposit", 2000), ("reserve", 4), ("settle", 4)]


async def test_cancel_and_completion_race_end_in_one_state(money: Money) -> None:
    """The cancel and the job's own end at the same moment, many times over: each order
    ends once, cancelled or succeeded, and is closed once for what that state costs."""
    await money.sim.post("/sim/faults", json={"latency_scale": 4, "duplicate_callbacks": 2})
    orders = [await _submitted(money) for _ in range(6)]
    await asyncio.sleep(0.4)  # about when the jobs end
    states = await asyncio.gather(*(_cancel(money, o) for o in orders))
    await _settle_down(money)
    for order_id, state in zip(orders, states, strict=True):
        o = await _order(money, order_id)
        assert o.status == state and state in ("cancelled", "succeeded"), (o.status, state)
    completed = await money.count(Event, Event.type == "generation.completed")
    assert completed == len(orders)


async def test_a_cancel_finds_a_job_whose_id_was_never_stored(money: Money) -> None:
    """The submit timed out after the vendor made the job: the cancel looks the job up by
    its key, re-attaches it and stops it; nothing runs on unpaid."""
    await money.sim.post(
        "/sim/faults", json={"submit_timeout_after_create": True, "submit_timeout_seconds": 2}
    )
    money.settings = money.settings.model_copy(update={"generation_submit_timeout_seconds": 0.5})
    with pytest.raises(httpx.TimeoutException):
        await _unclear_submit(money, money.ctx())
    async with money.db.session() as s:
        o = await s.scalar(select(GenerationOrder))
        assert o is not None
        order_id = o.id
    assert await _cancel(money, order_id) == "cancelled"
    (job,) = await money.jobs()
    assert job["status"] == "cancelled"
    assert (await _order(money, order_id)).upstream_job_id == job["job_id"]
    await _settle_down(money)
    assert await money.entries() == [("deposit", 2000), ("reserve", 4), ("refund", 4)]


async def _unclear_submit(m: Money, ctx: Any) -> None:
    """A submit whose answer is lost and whose lookup answers nothing (the lookup is
    refused), so the attempt raises as Temporal would see it."""
    real = m.settings
    m.settings = real.model_copy(update={"sim_token": SecretStr("wrong")})
    try:
        await m.image(ctx)
    finally:
        m.settings = real


async def test_a_lost_submit_answer_is_found_by_its_key_and_charged_once(
    money: Money,
) -> None:
    """The vendor made the job and answered too late: the attempt looks the job up by its
    key at once and re-attaches it. One job, one charge, the result collected."""
    await money.sim.post(
        "/sim/faults",
        json={"submit_timeout_after_create": True, "submit_timeout_seconds": 2, "latency_scale": 1},
    )
    money.settings = money.settings.model_copy(update={"generation_submit_timeout_seconds": 0.5})
    res = await money.image(money.ctx())
    assert res.status == "done" and res.order_id, res.result
    (job,) = await money.jobs()
    assert (await _order(money, res.order_id)).upstream_job_id == job["job_id"]
    assert await money.settled(res.order_id) == "succeeded"
    await _settle_down(money)
    assert len(await money.jobs()) == 1
    assert await money.entries() == [("deposit", 2000), ("reserve", 4), ("settle", 4)]
    st = await GenerationActivities(money.deps()).collect_generation(OrderRef(res.order_id))
    assert st.object_id


async def test_the_lookup_by_key_needs_the_account_key(money: Money) -> None:
    anon = httpx.AsyncClient(base_url=str(money.sim.base_url))
    async with anon:
        assert (await anon.get("/jobs", params={"idempotency_key": "x"})).status_code == 401
        assert (await anon.post("/jobs/nope/cancel")).status_code == 401
    r = await money.sim.get("/jobs", params={"idempotency_key": "never-used"})
    assert r.json() == {"jobs": []}
    assert (await money.sim.post("/jobs/nope/cancel")).status_code == 404

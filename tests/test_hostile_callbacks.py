"""Forged generation callbacks against the real api and simulator, on both databases: a
wrong secret, no or a malformed signature, another body's signature, a signature older (or
newer) than the freshness window, and a correctly signed report that names one person's
job with another person's order are all refused, and orders, ledger and events stay
exactly as they were. The genuine report is then accepted (the refusals were not
vacuous), and replaying it within the window changes nothing."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from lomo.auth import create_user
from lomo.db.models import Event, GenerationOrder, Task
from lomo.ids import new_id
from lomo.signing import SIGNATURE_HEADER, sign
from money.models import LedgerEntry
from tests.helpers import eventually
from tests.test_money import Money, money_env
from tools.base import ToolCallContext

CALLBACKS = "/v1/generation/callbacks"


@pytest.fixture
async def money(tmp_path: Path, db_url: str, temporal_server: str) -> AsyncIterator[Money]:
    async with money_env(tmp_path, db_url, temporal_server) as m:
        yield m


async def _state(m: Money) -> dict[str, Any]:
    """Every order, ledger entry and event of every person."""
    async with m.db.session() as s:
        orders = [
            (o.id, o.status, o.progress, o.last_seq, o.result_url)
            for o in await s.scalars(select(GenerationOrder).order_by(GenerationOrder.id))
        ]
        ledger = [
            (e.user_id, e.kind, e.amount_cents, e.key)
            for e in await s.scalars(select(LedgerEntry).order_by(LedgerEntry.id))
        ]
        events = [
            (e.user_id, e.seq, e.type) for e in await s.scalars(select(Event).order_by(Event.id))
        ]
    return {"orders": orders, "ledger": ledger, "events": events}


async def _second_person(m: Money) -> ToolCallContext:
    async with m.db.session() as s:
        user, _ = await create_user(s, "bob")
        task = Task(id=new_id("tsk"), user_id=user.id, kind="persistent", goal="poster")
        s.add(task)
    m.users.append(user.id)  # the books check covers both
    return ToolCallContext(task.id, user.id, f"{task.id}:1:1:0", 1, 1, 0)


async def test_forged_callbacks_are_refused_and_change_nothing(money: Money) -> None:
    m = money
    # Only the test's callbacks reach the api: the simulator's own are dropped.
    assert (await m.sim.post("/sim/faults", json={"drop_callbacks": True})).status_code == 200
    a = await m.image(m.ctx())
    b = await m.image(await _second_person(m))
    assert a.order_id and b.order_id

    async def finished() -> list[dict[str, Any]]:
        jobs = await m.jobs()
        done = len(jobs) == 2 and all(j["status"] == "succeeded" for j in jobs)
        return jobs if done else []

    jobs = await eventually(finished, within=30)
    async with m.db.session() as s:
        order_a = await s.get(GenerationOrder, a.order_id)
        order_b = await s.get(GenerationOrder, b.order_id)
        assert order_a is not None and order_b is not None
        job_a = next(j for j in jobs if j["job_id"] == order_a.upstream_job_id)
        key_a, key_b = order_a.idempotency_key, order_b.idempotency_key
        job_b_id = order_b.upstream_job_id
    report = {
        "job_id": job_a["job_id"],
        "status": "succeeded",
        "progress": 1.0,
        "seq": 99,
        "result_url": job_a["result_url"],
        "idempotency_key": key_a,
    }
    body = json.dumps(report).encode()
    secret = m.settings.callback_secret.get_secret_value()
    window = m.settings.callback_max_age_seconds
    before = await _state(m)
    assert all(o[1] not in ("succeeded", "failed") for o in before["orders"]), before

    def crossed(job_id: str | None, key: str) -> bytes:
        return json.dumps({**report, "job_id": job_id, "idempotency_key": key}).encode()

    forgeries: list[tuple[str, bytes, dict[str, str], int]] = [
        ("wrong secret", body, {SIGNATURE_HEADER: sign("not-the-secret", body)}, 401),
        ("no signature", body, {}, 401),
        ("malformed", body, {SIGNATURE_HEADER: "v1=abc"}, 401),
        ("untimed HMAC", body, {SIGNATURE_HEADER: sign(secret, body).split("v1=")[1]}, 401),
        ("another body's", body, {SIGNATURE_HEADER: sign(secret, body + b" ")}, 401),
        (
            "replayed old",
            body,
            {SIGNATURE_HEADER: sign(secret, body, at=time.time() - window - 30)},
            401,
        ),
        (
            "from the future",
            body,
            {SIGNATURE_HEADER: sign(secret, body, at=time.time() + window + 30)},
            401,
        ),
        # Correctly signed, but a's job with b's order (and the other way round).
        ("a's job, b's order", crossed(job_a["job_id"], key_b), {}, 404),
        ("b's job, a's order", crossed(job_b_id, key_a), {}, 404),
    ]
    for name, content, headers, status in forgeries:
        if status == 404:
            headers = {SIGNATURE_HEADER: sign(secret, content)}
        r = await m.api.post(
            CALLBACKS, content=content, headers={"Content-Type": "application/json", **headers}
        )
        assert r.status_code == status, (name, r.text)
        err = r.json()
        assert err["error"] == ("unauthorized" if status == 401 else "not_found"), (name, err)
        assert err["detail"], name
    assert await _state(m) == before

    # The genuine report, freshly signed, is taken; the same request again changes nothing.
    genuine = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body)}
    r = await m.api.post(CALLBACKS, content=body, headers=genuine)
    assert r.status_code == 200 and r.json()["changed"] is True, r.text
    after = await _state(m)
    statuses = {o[0]: o[1] for o in after["orders"]}
    assert statuses[a.order_id] == "succeeded"
    assert statuses[b.order_id] == {o[0]: o[1] for o in before["orders"]}[b.order_id]
    r = await m.api.post(CALLBACKS, content=body, headers=genuine)
    assert r.status_code == 200 and r.json()["changed"] is False, r.text
    assert await _state(m) == after

"""A job whose request is taken away while it runs is cancelled upstream, through the same
path as a stop (docs/architecture.md, "Cancelling on a move or a change"): the message
it was made for is moved to another task, or the person changes the request. Real
Temporal, the real simulator over HTTP and the real api (callbacks); the order ends once,
in `cancelled`, even when the job's completion callback races the cancel, and the task
says what was cancelled and why."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from temporalio.client import Client

from lomo.db.models import Event, GenerationOrder, Task
from lomo.ids import new_id
from lomo.states import TERMINAL_ORDER
from money.catalogue import cancel_charge
from money.models import LedgerEntry
from tests.helpers import eventually
from tests.runtime_support import replay_and_maybe_record
from tests.stack import Stack, running_stack


async def _waiting_task(st: Stack, words: str) -> str:
    r = await st.api.post("/v1/messages", json={"text": words}, headers=st.auth)
    mid = str(r.json()["message_id"])

    async def waiting() -> Any:
        m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
        if tid := m["routing"].get("task_id"):
            t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
            return tid if t["status"] == "waiting_generation" else None
        return None

    return str(await eventually(waiting, within=60))


async def _orders(st: Stack, tid: str) -> list[GenerationOrder]:
    async with st.db.session() as s:
        rows = await s.scalars(
            select(GenerationOrder)
            .where(GenerationOrder.task_id == tid)
            .order_by(GenerationOrder.created_at, GenerationOrder.id)
        )
        return list(rows)


async def _first_ended(st: Stack, tid: str) -> GenerationOrder | None:
    orders = await _orders(st, tid)
    return orders[0] if orders and orders[0].status in TERMINAL_ORDER else None


async def _ledger(st: Stack) -> list[tuple[str, str, int]]:
    async with st.db.session() as s:
        rows = await s.scalars(
            select(LedgerEntry).where(LedgerEntry.user_id == st.user_id).order_by(LedgerEntry.id)
        )
        return [(e.kind, e.key, e.amount_cents) for e in rows]


async def _events(st: Stack) -> list[dict[str, Any]]:
    ev = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
    return [json.loads(x[6:]) for x in ev.text.splitlines() if x.startswith("data: ")]


def _timeline(events: list[dict[str, Any]], tid: str) -> str:
    """The task's events, seconds after the first: what a reader of the stream saw."""
    keep = ("task.status", "task.reply", "generation.", "message.", "budget.")
    lines = []
    start = datetime.fromisoformat(events[0]["at"]) if events else None
    for e in events:
        d = e["data"]
        if not e["type"].startswith(keep) or d.get("task_id") not in (tid, None):
            continue
        said = {k: v for k, v in d.items() if k in ("status", "order_id", "message_id", "text")}
        at = (datetime.fromisoformat(e["at"]) - start).total_seconds() if start else 0.0
        lines.append(f"{at:6.2f}s {e['type']:<22} {said}")
    return "\n".join(lines)


async def test_moving_the_message_cancels_the_job_made_for_it(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        await st.sim.post("/sim/faults", json={"latency_scale": 80})  # ~8 s job
        other = new_id("tsk")
        async with st.db.session() as s:
            s.add(Task(id=other, user_id=st.user_id, kind="persistent", goal="Retro posters"))
        tid = await _waiting_task(st, "Generate an image of a red tabby cat")
        async with st.db.session() as s:
            mid = await s.scalar(
                select(Event.data["message_id"].as_string()).where(
                    Event.user_id == st.user_id, Event.type == "message.read"
                )
            )
        before = await _ledger(st)
        r = await st.api.post(f"/v1/messages/{mid}/move", json={"task_id": other}, headers=st.auth)
        assert r.status_code == 200, r.text
        order = await eventually(lambda: _first_ended(st, tid), within=60)
        assert order.status == "cancelled" and order.object_id is None
        charge = cancel_charge(order.price_cents, order.progress)

        async def told() -> Any:
            replies = [
                e
                for e in await _events(st)
                if e["type"] == "task.reply" and e["data"].get("task_id") == tid
            ]
            return next((e for e in replies if "moved" in e["data"]["text"]), None)

        reply = await eventually(told, within=60)
        assert reply["data"]["by"] == "runtime"
        after = await _ledger(st)
        mine = [e for e in after if e[1] == order.idempotency_key]
        closing = [(k, a) for k, _, a in mine if k in ("settle", "refund")]
        assert sum(a for _, a in closing) == order.price_cents
        assert dict(closing).get("settle", 0) == charge
        print("\nledger before:", before, "\nledger after:", after)
        print(_timeline(await _events(st), tid))
        assert await replay_and_maybe_record(temporal_client, f"task:{tid}", "task_cancel_on_move")


async def test_a_change_while_the_job_runs_cancels_it_and_a_late_completion_changes_nothing(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """The vendor's completion is already on its way when the cancel lands (the
    simulator's `complete_after` race): the order stays cancelled, is closed once for the
    partial price, and the task makes the changed request anew."""
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        await st.sim.post(
            "/sim/faults",
            json={"latency_scale": 60, "cancel_race": "complete_after", "duplicate_callbacks": 2},
        )
        tid = await _waiting_task(st, "Generate an image of a red tabby cat")

        async def started() -> Any:
            orders = await _orders(st, tid)
            return orders[0] if orders and orders[0].progress > 0 else None

        await eventually(started, within=30, interval=0.05)
        before = await _ledger(st)
        r = await st.api.post(
            f"/v1/tasks/{tid}/messages",
            json={"text": "actually make it a black cat instead"},
            headers=st.auth,
        )
        assert r.status_code == 202, r.text
        first = await eventually(lambda: _first_ended(st, tid), within=60)
        assert first.status == "cancelled" and first.object_id is None
        await st.sim.post("/sim/faults", json={"latency_scale": 1})

        async def remade() -> Any:
            orders = await _orders(st, tid)
            return orders if len(orders) > 1 and orders[1].status in TERMINAL_ORDER else None

        orders = await eventually(remade, within=90)
        first = orders[0]
        assert first.status == "cancelled" and first.object_id is None  # the late callback
        charge = cancel_charge(first.price_cents, first.progress)
        after = await _ledger(st)
        mine = [(k, a) for k, key, a in after if key == first.idempotency_key]
        assert mine == [("reserve", first.price_cents), ("settle", charge)] + (
            [("refund", first.price_cents - charge)] if charge < first.price_cents else []
        )
        # One end per order: the cancelled one's late completion added none.
        completed = [
            e["data"]["status"]
            for e in await _events(st)
            if e["type"] == "generation.completed" and e["data"].get("task_id") == tid
        ]
        assert completed == ["cancelled", orders[1].status], completed
        replies = [
            e["data"]["text"]
            for e in await _events(st)
            if e["type"] == "task.reply" and e["data"].get("task_id") == tid
        ]
        assert any(t.startswith("You changed the request") for t in replies), replies
        print("\nledger before:", before, "\nledger after:", after)
        print(_timeline(await _events(st), tid))
        assert await replay_and_maybe_record(
            temporal_client, f"task:{tid}", "task_cancel_on_change"
        )

"""Nothing left hanging: a job the upstream never finishes (the simulator's slowness and
dropped-callback faults) is polled at a doubling interval, so its task's history grows
ever slower, and past its deadline it fails cleanly: the order `failed` with the reason,
its charge refunded, and the person told in the task, in the task's language. A flow run
parked on an open card re-reads it at a doubling interval too."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from temporalio.client import Client, WorkflowHandle

from lomo.db.models import Event, GenerationOrder, Task
from lomo.states import EventType
from lomo.words import euros, say
from money.models import LedgerEntry
from standin.scripted import ScriptedProvider
from tests.flow_support import create_flow, film, owning_task, start_run, wait_status
from tests.helpers import eventually
from tests.runtime_support import start_task, text, tool_use
from tests.stack import Stack, running_stack

# The upstream never finishes: a picture step of hours, and no callback reaches us.
NEVER = {"latency_scale": 100_000.0, "drop_callbacks": True}
PROMPT = "a red fox in the snow"


async def _stuck_upstream(st: Stack) -> None:
    r = await st.sim.post("/sim/faults", json=NEVER)
    assert r.status_code == 200, r.text


async def _order(st: Stack) -> GenerationOrder | None:
    async with st.db.session() as s:
        return await s.scalar(select(GenerationOrder))


async def _submitted(st: Stack) -> GenerationOrder | None:
    order = await _order(st)
    return order if order is not None and order.upstream_job_id else None


async def _events(handle: WorkflowHandle[Any, Any]) -> int:
    return len((await handle.fetch_history()).events)


def _provider() -> ScriptedProvider:
    return ScriptedProvider(
        [tool_use("generate_image", {"prompt": PROMPT}, "toolu_gen_1")] + [text("Noted.")] * 5
    )


@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_job_never_finished_fails_at_its_deadline_refunded_and_told(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    language: str,
) -> None:
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        provider=_provider(),
        generation_deadline_seconds={"image": 4.0},
    ) as st:
        await _stuck_upstream(st)
        task_id, handle = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            f"make {PROMPT}",
            generation_wait_seconds=0.25,
            generation_wait_max_seconds=2.0,
        )
        async with st.db.session() as s:
            await s.execute(update(Task).where(Task.id == task_id).values(language=language))
        await eventually(lambda: _submitted(st), within=60)
        try:
            assert await asyncio.wait_for(handle.result(), 90) == "completed"
        finally:
            print("order:", (o := await _order(st)) and (o.status, o.error, o.created_at))
            print("task:", await handle.query("state"))
        order = await _order(st)
        assert order is not None
        async with st.db.session() as s:
            entries = [
                (e.kind, e.amount_cents)
                for e in await s.scalars(
                    select(LedgerEntry)
                    .where(LedgerEntry.order_id == order.id)
                    .order_by(LedgerEntry.id)
                )
            ]
            replies = [
                e.data["text"]
                for e in await s.scalars(
                    select(Event).where(Event.type == EventType.TASK_REPLY).order_by(Event.seq)
                )
            ]
    assert order.status == "failed"
    assert order.error == say("generation.deadline_reason", language, minutes=1)
    price = order.price_cents
    assert price > 0 and entries == [("reserve", price), ("refund", price)]
    amount = euros(price, language)
    told = say("generation.deadline", language, name=PROMPT, minutes=1, amount=amount)
    assert told in replies, replies


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_stuck_job_grows_its_history_ever_slower(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    span = 5.0  # polls after 0.25, 0.75, 1.75, 3.75 s in the first span, 7.75 s in the second
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=_provider()
    ) as st:
        await _stuck_upstream(st)
        _, handle = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            f"make {PROMPT}",
            generation_wait_seconds=0.25,
            generation_wait_max_seconds=1_000.0,
        )
        await eventually(lambda: _submitted(st), within=60)
        start = await _events(handle)
        await asyncio.sleep(span)
        middle = await _events(handle)
        await asyncio.sleep(span)
        end = await _events(handle)
        await handle.terminate("the test is over")  # the job never ends; nothing to wait for
    print(f"history events while stuck: +{middle - start} in the first {span:.0f} s, ", end="")
    print(f"+{end - middle} in the second")
    assert end - middle < middle - start, (start, middle, end)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_an_open_card_adds_a_bounded_number_of_events(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    wait, periods = 0.5, 40
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        card_wait_seconds=wait,
        card_wait_max_seconds=1_000.0,
    ) as st:
        task_id = await owning_task(st.db, st.user_id)
        run_id = await start_run(st, await create_flow(st, film(3)), task_id)
        await wait_status(st, run_id, "waiting_price")
        handle = temporal_client.get_workflow_handle(f"flowrun:{run_id}")
        start = await _events(handle)
        await asyncio.sleep(wait * periods)
        added = await _events(handle) - start
        await handle.terminate("the test is over")
    print(f"history events over {periods} card waits: +{added}")
    # A re-read costs about a dozen events; doubling waits make log2(periods) + 1 of them
    # (without the back-off: one per period and re-read, over 200 here).
    assert added <= 12 * 7, added

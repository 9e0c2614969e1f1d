"""A message is stored, answered promptly and handed to Temporal later when the hand-off
hangs or Temporal is down.

A message to a task (`POST /v1/tasks/{id}/messages`, or `POST /v1/messages` with a
target) is handed over with the task's `message` update, which waits until a worker
accepts it: with no worker polling the task's queue the request hung until its client
gave up. With the api's Temporal down the route refused before storing anything (a 500
from resolving the client), and with Temporal going down after the api connected, the
client's retries held the request ~10 s and then answered 500 (main thread) or a false
409 "task is not running" (a direct message). Here the request must answer 202 within
`handoff_wait_seconds` with the message stored, and the message must reach its task or
the main thread once Temporal (or a worker) is back, through the relay (`api/services/relay.py`)
or the update the server kept.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from temporalio.client import Client
from temporalio.service import RetryConfig, RPCError, RPCStatusCode

from activities.registry import build_activities
from api.dispatch.tasks import deliver_to_task
from api.services.relay import relay_once
from cli.worker import make_worker
from lomo.db.models import MessageRow, Task
from lomo.errors import Conflict
from lomo.ids import new_id
from tests.handoff_support import TcpProxy, fail_hand_off, get_message, persistent_task
from tests.helpers import eventually, free_port
from tests.stack import Stack, running_stack

WAIT_S = 1.0  # the request's hand-off bound in these tests
PROMPT_S = 10.0  # "promptly": the bound plus HTTP and a DB round trip, with room to spare
DARKER = "Make it a bit darker"
CAT = "Generate an image of a red tabby cat"


async def _post(stack: Stack, path: str, body: dict[str, Any]) -> tuple[httpx.Response, float]:
    t0 = time.monotonic()
    r = await stack.api.post(
        path,
        json=body,
        headers=stack.auth,
        timeout=PROMPT_S + 20,  # longer than "prompt": a hang shows as a slow answer
    )
    return r, time.monotonic() - t0


async def _row(stack: Stack, mid: str) -> MessageRow:
    async with stack.db.session() as s:
        row = await s.get(MessageRow, mid)
    assert row is not None, "the message was not stored"
    return row


async def _waiting_on_price(stack: Stack, task_id: str) -> bool:
    """The persistent task is idle on its price card: no activity in flight."""
    t = (await stack.api.get(f"/v1/tasks/{task_id}", headers=stack.auth)).json()
    return t["status"] == "waiting_user" and any(
        c["kind"] == "price" and c["status"] == "open" for c in t["cards"]
    )


async def _read_by(stack: Stack, mid: str) -> Any:
    return (await get_message(stack, mid)).get("processed")


async def _handed(stack: Stack, mid: str) -> bool:
    return (await _row(stack, mid)).handed_at is not None


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_direct_message_is_answered_promptly_while_no_worker_takes_it(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """Real Temporal, nothing patched: the task's workflow runs but its worker is gone, so
    the `message` update waits for one. Once a worker runs again the task reads the
    message, exactly as if the request had waited."""
    async with (
        running_stack(
            tmp_path,
            db_url,
            temporal_server,
            temporal_client,
            task_queue,
            in_process_worker=False,
            handoff_relay_seconds=1.0,
            handoff_wait_seconds=WAIT_S,
        ) as stack,
        httpx.AsyncClient(timeout=30) as http,
    ):
        acts = build_activities(stack.settings, stack.db, http)
        async with make_worker(temporal_client, stack.settings, acts):
            task_id = await persistent_task(stack)
            await eventually(lambda: _waiting_on_price(stack, task_id), within=90)
        # The worker is gone: nothing polls the task's queue.
        r, took = await _post(stack, f"/v1/tasks/{task_id}/messages", {"text": DARKER})
        assert r.status_code == 202, r.text
        assert took < PROMPT_S, f"the message took {took:.1f} s"
        mid = r.json()["message_id"]
        assert r.json()["routing"]["task_id"] == task_id
        row = await _row(stack, mid)
        assert row.text == DARKER and row.handed_at is None  # owed to Temporal
        assert await _read_by(stack, mid) is None
        async with make_worker(temporal_client, stack.settings, acts):
            seen = await eventually(lambda: _read_by(stack, mid), within=90)
            assert seen["task_id"] == task_id
            await eventually(lambda: _handed(stack, mid), within=30)


async def test_a_message_is_stored_and_answered_while_temporal_is_unreachable(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """The api's Temporal address is a dead port (the dev server is down): a message to a
    task, one with a target and one for the main thread are each stored and answered 202,
    their hand-off left owed; the client's retry of one changes nothing."""
    async with running_stack(
        tmp_path,
        db_url,
        f"127.0.0.1:{free_port()}",
        temporal_client,
        task_queue,
        in_process_worker=False,
        handoff_relay_seconds=0,
        handoff_wait_seconds=WAIT_S,
    ) as stack:
        task_id = new_id("tsk")
        async with stack.db.session() as s:
            s.add(
                Task(
                    id=task_id,
                    user_id=stack.user_id,
                    kind="persistent",
                    status="waiting_user",
                    goal="Retro posters",
                )
            )
        sent = [
            (f"/v1/tasks/{task_id}/messages", {"text": DARKER, "client_message_id": "c-1"}),
            ("/v1/messages", {"text": "And a bit bolder", "task_id": task_id}),
            ("/v1/messages", {"text": CAT}),
        ]
        ids = []
        for path, body in sent:
            r, took = await _post(stack, path, body)
            assert r.status_code == 202, r.text
            assert took < PROMPT_S, f"{path} took {took:.1f} s"
            row = await _row(stack, r.json()["message_id"])
            assert row.text == body["text"] and row.handed_at is None
            ids.append(row.id)
        assert [(await _row(stack, i)).task_id for i in ids] == [task_id, task_id, None]
        r, _ = await _post(stack, *sent[0])  # the client's retry: the same message
        assert r.status_code == 202, r.text
        assert r.json()["message_id"] == ids[0]
        async with stack.db.session() as s:
            stored = list(await s.scalars(select(MessageRow.id)))
        assert sorted(stored) == sorted(ids)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_messages_sent_while_temporal_is_down_arrive_once_it_is_back(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """The api connected, then its Temporal went away (the dev server restarting): the
    client retries a signal-with-start (main thread, memory extraction) or an update for
    ~10 s before it gives up. The requests answer within the bound, a direct message is
    not refused as if its task had ended, and the relay hands both over once Temporal is
    back. The worker keeps its own connection: only the api's is cut."""
    proxy = TcpProxy(temporal_server, free_port())
    await proxy.start()
    async with running_stack(
        tmp_path,
        db_url,
        proxy.address,
        temporal_client,
        task_queue,
        handoff_relay_seconds=1.0,
        handoff_wait_seconds=WAIT_S,
    ) as stack:
        task_id = await persistent_task(stack)  # the api's client is connected by now
        await eventually(lambda: _waiting_on_price(stack, task_id), within=90)
        await proxy.stop()
        direct, took = await _post(stack, f"/v1/tasks/{task_id}/messages", {"text": DARKER})
        assert direct.status_code == 202, direct.text
        assert took < PROMPT_S, f"the direct message took {took:.1f} s"
        routed, took = await _post(stack, "/v1/messages", {"text": CAT})
        assert routed.status_code == 202, routed.text
        assert took < PROMPT_S, f"the message for the main thread took {took:.1f} s"
        to_task, to_main = direct.json()["message_id"], routed.json()["message_id"]
        assert (await _row(stack, to_task)).handed_at is None
        assert (await _row(stack, to_main)).handed_at is None
        await proxy.start()
        seen = await eventually(lambda: _read_by(stack, to_task), within=90)
        assert seen["task_id"] == task_id

        async def routed_task() -> Any:
            return (await get_message(stack, to_main))["routing"].get("task_id")

        assert await eventually(routed_task, within=90) not in (None, task_id)
        await eventually(lambda: _handed(stack, to_task), within=30)
        await eventually(lambda: _handed(stack, to_main), within=30)
    await proxy.stop()


async def test_temporal_unreachable_is_not_a_task_that_ended(temporal_server: str) -> None:
    """A direct message's 409 means the task refused it or its workflow ended; Temporal
    being unreachable was reported the same way ("task ... is not running") once the
    client's retries ran out, so a request with a bound longer than those retries answered
    a false 409. Here the client retries briefly."""
    proxy = TcpProxy(temporal_server, free_port())
    await proxy.start()
    client = await Client.connect(
        proxy.address, retry_config=RetryConfig(max_retries=2, max_elapsed_time_millis=1000)
    )
    with pytest.raises(Conflict, match="is not running"):  # no such workflow: a 409
        await deliver_to_task(client, new_id("tsk"), new_id("msg"))
    await proxy.stop()
    with pytest.raises(RPCError) as unreachable:
        await deliver_to_task(client, new_id("tsk"), new_id("msg"))
    assert unreachable.value.status == RPCStatusCode.UNAVAILABLE


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_relay_round_is_not_held_up_by_a_task_no_worker_takes(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rounds are driven by hand (the loop is off). The first stranded message is for a
    task whose queue no worker polls: its update would wait for one for good, and the round
    with it, so the next message (for the main thread, whose worker runs) would never be
    handed over. Each hand-off of a round is bounded like the request's."""
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        handoff_relay_seconds=0,
        handoff_wait_seconds=WAIT_S,
    ) as stack:
        task_id = new_id("tsk")
        async with stack.db.session() as s:
            s.add(
                Task(
                    id=task_id,
                    user_id=stack.user_id,
                    kind="persistent",
                    status="waiting_user",
                    goal="Retro posters",
                )
            )
        stuck = await temporal_client.start_workflow(
            "TaskWorkflow", id=f"task:{task_id}", task_queue=f"{task_queue}-idle"
        )
        r, _ = await _post(stack, f"/v1/tasks/{task_id}/messages", {"text": DARKER})
        assert r.status_code == 202, r.text
        to_task = r.json()["message_id"]
        failed = fail_hand_off(monkeypatch, "route_via_main", 1)
        r, _ = await _post(stack, "/v1/messages", {"text": CAT})
        assert failed and r.status_code == 202, r.text
        to_main = r.json()["message_id"]
        assert not await _handed(stack, to_task) and not await _handed(stack, to_main)
        settings = stack.settings.model_copy(update={"handoff_relay_seconds": 0.0})
        t0 = time.monotonic()
        done = await asyncio.wait_for(
            relay_once(stack.db, temporal_client, settings), PROMPT_S + 20
        )
        assert time.monotonic() - t0 < PROMPT_S
        assert done == 1
        assert await _handed(stack, to_main) and not await _handed(stack, to_task)

        async def routed() -> Any:
            return (await get_message(stack, to_main))["routing"].get("task_id")

        assert await eventually(routed, within=60)
        await stuck.terminate()

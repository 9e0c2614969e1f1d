"""A message the api stored is never lost between the database and Temporal.

The scenario harness on Postgres crashed every ~10 s once saw a message answered 202 and
never routed. The cause: the api stores the message, commits, then hands it to Temporal;
when that hand-off failed (Temporal restarting, or a commit whose answer the crash ate) the
client got a 500 and sent the same client_message_id again, and the retry found the stored
row and answered 202 without handing it over. A card answer had the same gap (the retry
got 409 and a clarify answer never reached the main thread). These tests fail the hand-off
at exactly that point, on both databases, then retry as a client does. (A failed hand-off
is now answered 202, the message stored and owed, and the relay is off here: the retry is
of a client that never heard that answer, e.g. the api died before sending it.)
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

import api.services.card_effects as card_effects
from api.dispatch.tasks import route_via_main
from lomo.db.models import Task
from lomo.ids import new_id
from tests.handoff_support import fail_hand_off, get_message, persistent_task
from tests.helpers import eventually
from tests.stack import Stack, running_stack

CAT = "Generate an image of a red tabby cat"


async def _unhanded(request: Awaitable[httpx.Response]) -> str:
    """The first attempt: its hand-off failed, so the message is answered 202 as stored and
    owed (`handoff_wait_seconds`); the client is taken not to have heard it."""
    r = await request
    assert r.status_code == 202, r.text
    return str(r.json()["message_id"])


async def _again(stack: Stack, path: str, body: dict[str, Any]) -> httpx.Response:
    """The client's retry. The server closes a connection after a 500, so the pooled one
    may be dead: a client sends again on a new one (as the scenario person does)."""
    for _ in range(3):
        try:
            return await stack.api.post(path, json=body, headers=stack.auth)
        except httpx.TransportError:
            continue
    raise AssertionError(f"POST {path} never answered")


async def _post(stack: Stack, cid: str) -> httpx.Response:
    return await _again(stack, "/v1/messages", {"text": CAT, "client_message_id": cid})


async def test_a_retry_hands_over_a_message_whose_first_hand_off_failed(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, handoff_relay_seconds=0
    ) as stack:
        failed = fail_hand_off(monkeypatch, "route_via_main")
        first = await _unhanded(_post(stack, "cid-1"))  # stored, not handed over
        assert failed
        r = await _post(stack, "cid-1")  # the client's retry: the same message
        assert r.status_code == 202, r.text
        mid = r.json()["message_id"]
        assert mid == first

        async def routed() -> Any:
            m = await get_message(stack, mid)
            return m if m["routing"].get("task_id") else None

        m = await eventually(routed, within=60)
        assert m["routing"]["decision"] == "lightweight"


async def test_a_retry_delivers_a_direct_message_whose_first_delivery_failed(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, handoff_relay_seconds=0
    ) as stack:
        task_id = await persistent_task(stack)
        failed = fail_hand_off(monkeypatch, "deliver_to_task")
        later = {"text": "Make it a bit darker", "client_message_id": "cid-2"}
        first = await _unhanded(
            stack.api.post(f"/v1/tasks/{task_id}/messages", json=later, headers=stack.auth)
        )
        assert failed
        r = await _again(stack, f"/v1/tasks/{task_id}/messages", later)
        assert r.status_code == 202, r.text
        mid = r.json()["message_id"]
        assert mid == first

        async def read_by_task() -> Any:
            return (await get_message(stack, mid)).get("processed")

        seen = await eventually(read_by_task, within=90)
        assert seen["task_id"] == task_id


async def test_a_message_handed_to_the_main_thread_twice_is_handed_over_once(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """Both the first request and the retry may reach Temporal (the client gave up waiting
    on the first): the main thread routes the id again and must neither start its task a
    second time nor stop (a child with a running task's id would fail the main thread)."""
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue
    ) as stack:
        r = await _post(stack, "cid-a")
        mid = r.json()["message_id"]

        async def routed(m_id: str) -> Any:
            return (await get_message(stack, m_id))["routing"].get("task_id")

        task_id = await eventually(lambda: routed(mid), within=60)
        await route_via_main(temporal_client, stack.settings, stack.user_id, mid)
        # FIFO: once a later message is routed, the repeat was handled before it.
        r = await stack.api.post(
            "/v1/messages",
            json={"text": "Generate an image of a teapot", "client_message_id": "cid-b"},
            headers=stack.auth,
        )
        later = r.json()["message_id"]
        assert await eventually(lambda: routed(later), within=60) != task_id
        main = await temporal_client.get_workflow_handle(f"main:{stack.user_id}").describe()
        assert main.status == WorkflowExecutionStatus.RUNNING
        runs = [w async for w in temporal_client.list_workflows(f'WorkflowId = "task:{task_id}"')]
        assert len(runs) == 1, [(w.run_id, w.status) for w in runs]


async def test_a_retried_clarify_answer_reaches_the_main_thread(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same for a card: the answer is stored, its hand-off to the main thread fails
    (the answer still comes back: it is stored), and the client's retry (answered 409: the
    card is answered) must still hand it on. The relay is off: this is the retry's doing
    (tests/test_card_handoff.py has the relay's)."""
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, handoff_relay_seconds=0
    ) as stack:
        when = datetime.now(UTC) - timedelta(minutes=3)
        async with stack.db.session() as s:
            tasks = [
                Task(
                    id=new_id("tsk"),
                    user_id=stack.user_id,
                    kind="lightweight",
                    status="completed",
                    goal=goal,
                    created_at=when,
                    updated_at=when,
                )
                for goal in ("Generate an image of a lighthouse", "Generate an image of a fox")
            ]
            s.add_all(tasks)
        r = await _again(stack, "/v1/messages", {"text": "Make that blue"})
        mid = r.json()["message_id"]

        async def clarify_card() -> Any:
            cards = (await stack.api.get("/v1/cards?status=open", headers=stack.auth)).json()
            return next((c for c in cards["cards"] if c["kind"] == "clarify"), None)

        card = await eventually(clarify_card, within=60)
        real = card_effects.route_via_main
        failed: list[str] = []

        async def flaky(*args: Any) -> None:
            if not failed:
                failed.append(str(args))
                raise RPCError("temporal unavailable", RPCStatusCode.UNAVAILABLE, b"")
            await real(*args)

        monkeypatch.setattr(card_effects, "route_via_main", flaky)
        answer = {"action": "select", "option_id": tasks[1].id}
        path = f"/v1/cards/{card['card_id']}/actions"
        r = await _again(stack, path, answer)
        assert failed and r.status_code == 200, r.text
        r = await _again(stack, path, answer)
        assert r.status_code == 409, r.text  # answered already, and handed on again

        async def routed() -> Any:
            return (await get_message(stack, mid))["routing"].get("task_id")

        assert await eventually(routed, within=60) == tasks[1].id

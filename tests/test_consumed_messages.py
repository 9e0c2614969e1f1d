"""A message its task has already read is never read twice.

Every hand-off of a stored message is repeatable: the relay, a client's retry and the api's
fallback through the main thread hand over a message they saw as not yet read, and the
task may read it in between. The inbox dedupes only ids it still holds; the task also
remembers the ids it read (carried across continue-as-new), takes a repeat without a
refusal (a 409 would send the message through the main thread) and runs no turn for it.
A task whose workflow already ended is not started again for it by the main thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy

import api.services.relay as relay
from api.dispatch.tasks import deliver_to_task
from api.services.relay import relay_once
from lomo.db.models import MessageRow, ModelStep, Task
from standin.scripted import ScriptedProvider
from tests.handoff_support import get_message
from tests.helpers import eventually
from tests.runtime_support import (
    add_message,
    replay_and_maybe_record,
    start_task,
    text,
    tool_use,
)
from tests.stack import Stack, running_stack
from workflows.task import TaskWorkflow
from workflows.types import TaskInput

TURNS = 40  # more scripted answers than any test here needs (a repeat read uses one)
UNSCRIPTED = ("extract", "summarize", "summarize_episode", "route")


def _provider(*answers: Any) -> ScriptedProvider:
    """Counts the task's model calls only (background and routing calls answer offline)."""
    return ScriptedProvider(list(answers) or [text("Noted.")] * TURNS, unscripted=UNSCRIPTED)


async def _steps(st: Stack, task_id: str) -> int:
    async with st.db.session() as s:
        n = await s.scalar(
            select(func.count()).select_from(ModelStep).where(ModelStep.task_id == task_id)
        )
    return int(n or 0)


async def _idle(handle: WorkflowHandle[Any, Any], status: str = "waiting_user") -> dict[str, Any]:
    """The task waits with nothing held: any turn a repeat caused has run by then."""

    async def settled() -> Any:
        state: dict[str, Any] = await handle.query("state")
        return state if state["status"] == status and not state["inbox"] else None

    result: dict[str, Any] = await eventually(settled, within=60)
    return result


async def _send(st: Stack, task_id: str, words: str) -> str:
    """A message to the task itself (the direct path), read by it before this returns."""
    r = await st.api.post(f"/v1/tasks/{task_id}/messages", json={"text": words}, headers=st.auth)
    assert r.status_code == 202, r.text
    mid = str(r.json()["message_id"])

    async def read() -> Any:
        return (await get_message(st, mid)).get("processed")

    await eventually(read, within=60)
    return mid


def _stale_relay(monkeypatch: pytest.MonkeyPatch) -> None:
    """The relay read the rows just before their task read them: it hands them over."""
    monkeypatch.setattr(relay, "arrived", lambda m: False)


async def test_a_read_message_handed_over_again_runs_no_second_turn(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = _provider()
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "Collect ideas", kind="persistent"
        )
        await _idle(handle)
        mid = await _send(st, tid, "idea one")
        before = await _idle(handle)
        steps, calls = await _steps(st, tid), len(provider.requests)
        read_at = (await get_message(st, mid))["processed"]

        # The update as the api sends it, directly and through the api's dispatch: taken
        # (no 409, which would re-route it through the main thread), with the same answer.
        assert await handle.execute_update("message", mid) == "waiting_user"
        assert await deliver_to_task(temporal_client, tid, mid) == "waiting_user"
        # The main thread's delivery into a running task.
        await handle.signal("deliver", mid)
        # The relay: both messages the task read lost their mark and look unread to it.
        _stale_relay(monkeypatch)
        async with st.db.session() as s:
            await s.execute(
                update(MessageRow).where(MessageRow.task_id == tid).values(handed_at=None)
            )
        settings = st.settings.model_copy(update={"handoff_relay_seconds": 0.0})
        assert await relay_once(st.db, temporal_client, settings) == 2

        # A new message is the barrier: it is read in the very next turn.
        fresh = await _send(st, tid, "idea two")
        after = await _idle(handle)
        assert after["turn"] == before["turn"] + 1
        assert (await get_message(st, fresh))["processed"]["turn"] == before["turn"] + 1
        assert await _steps(st, tid) == steps + 1
        assert len(provider.requests) == calls + 1
        assert (await get_message(st, mid))["processed"] == read_at
        # The history with the repeats (and the patch marker) replays deterministically.
        await replay_and_maybe_record(temporal_client, f"task:{tid}", "task_consumed_repeat")


async def test_an_ended_task_is_not_started_again_for_a_message_it_read(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lightweight task reads its message and ends; the relay's stale hand-off finds no
    running workflow (a 409) and falls back to the main thread, which must not start the
    task again in place to read the message a second time."""
    provider = _provider()
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "What is a haiku?"
        )
        assert await handle.result() == "completed"
        assert await _steps(st, tid) == 1
        _stale_relay(monkeypatch)
        async with st.db.session() as s:
            await s.execute(
                update(MessageRow).where(MessageRow.task_id == tid).values(handed_at=None)
            )
        settings = st.settings.model_copy(update={"handoff_relay_seconds": 0.0})
        assert await relay_once(st.db, temporal_client, settings) == 1

        main = temporal_client.get_workflow_handle(f"main:{st.user_id}")

        async def acted_on_the_plan() -> Any:
            """The main thread's workflow task after the routing activity has completed:
            whatever it does with the plan is in history by then."""
            kinds = [e.WhichOneof("attributes") for e in (await main.fetch_history()).events]
            routed = "activity_task_completed_event_attributes"
            tail = kinds[kinds.index(routed) :] if routed in kinds else []
            return kinds if "workflow_task_completed_event_attributes" in tail else None

        kinds = await eventually(acted_on_the_plan, within=60)
        assert "signal_external_workflow_execution_initiated_event_attributes" not in kinds
        assert "start_child_workflow_execution_initiated_event_attributes" not in kinds
        runs = [r async for r in temporal_client.list_workflows(f'WorkflowId = "task:{tid}"')]
        assert len(runs) == 1
        assert await _steps(st, tid) == 1 and len(provider.requests) == 1
        async with st.db.session() as s:
            task = await s.get(Task, tid)
            assert task is not None and task.status == "completed"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # workflow logic only
async def test_a_task_stopped_by_a_limit_takes_a_read_message_again_without_a_409(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """A task the runtime stopped (here: its step limit) refuses new messages, but a
    repeat of one it read is taken: a refusal would be a 409 and send it elsewhere."""
    provider = _provider(tool_use("update_checklist", {"update": []}, "tu_1"))
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            "Plan the posters",
            kind="persistent",
            max_steps_per_turn=1,
        )
        await _idle(handle, "stopped")
        async with st.db.session() as s:
            mid = await s.scalar(select(MessageRow.id).where(MessageRow.task_id == tid))
        assert mid is not None
        assert await handle.execute_update("message", mid) == "stopped"
        assert await deliver_to_task(temporal_client, tid, mid) == "stopped"
        unread = await add_message(st.db, st.user_id, tid, "and one more")
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update("message", unread)
        await _idle(handle, "stopped")
        assert await _steps(st, tid) == 1 and len(provider.requests) == 1


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # workflow logic only
async def test_read_messages_are_remembered_across_continue_as_new(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """Repeats of a read message (each an accepted update, a few history events) fill the
    history until Temporal suggests continue-as-new (after 400 events in the test
    server); the next run still knows the message was read."""
    provider = _provider()
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "Collect ideas", kind="persistent"
        )
        await _idle(handle)
        mid = await _send(st, tid, "idea one")
        before = await _idle(handle)
        first_run = (await handle.describe()).run_id
        latest = temporal_client.get_workflow_handle(f"task:{tid}")
        for _ in range(200):
            assert await latest.execute_update("message", mid) == "waiting_user"
            if (await latest.describe()).run_id != first_run:
                break
        else:
            raise AssertionError("the task never continued as new")
        # The new run: the read message is still known (and the first run's first one).
        assert await latest.execute_update("message", mid) == "waiting_user"
        fresh = await _send(st, tid, "idea two")
        after = await _idle(latest)
        assert after["turn"] == before["turn"] + 1
        assert (await get_message(st, fresh))["processed"]["turn"] == before["turn"] + 1
        assert await _steps(st, tid) == before["turn"] + 1
        assert len(provider.requests) == before["turn"] + 1
        await replay_and_maybe_record(temporal_client, f"task:{tid}", "task_consumed_rollover")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # workflow logic only
async def test_a_message_in_a_continued_runs_first_task_sees_the_carried_state(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """An update can be handled in a run's first workflow task, before `run` starts. A run
    continued as new (here: started with carried state, update-with-start delivering the
    update in that first task) answered from the defaults instead: `running` for a task
    waiting on the person, and a read message was not known as read (seen in CI)."""
    provider = _provider()
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "Collect ideas", kind="persistent"
        )
        await _idle(handle)
        read = await _send(st, tid, "idea one")
        state = await _idle(handle)
        await handle.terminate("replaced by a continued run")
        carried = TaskInput(
            tid,
            st.user_id,
            "persistent",
            turn=state["turn"],
            status="waiting_user",
            consumed_messages=[read],
        )
        start = WithStartWorkflowOperation(
            TaskWorkflow.run,
            carried,
            id=f"task:{tid}",
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        )
        answer = await temporal_client.execute_update_with_start_workflow(
            TaskWorkflow.message, read, start_workflow_operation=start
        )
        assert answer == "waiting_user"
        continued = await start.workflow_handle()
        after = await _idle(continued)
        assert after["turn"] == state["turn"]  # the read message started no turn
        assert len(provider.requests) == state["turn"]

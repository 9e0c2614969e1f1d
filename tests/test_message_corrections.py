"""Correcting a message (docs/api.md, "Correcting a message"): withdrawing one its task has
not read, moving one to another task, and each message's state on the way.

Real api, Temporal and databases; the model is scripted and records what each task's
model calls were sent, so "the task never acts on it" is checked by what it saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.client import Client

from llm.types import ModelRequest
from standin.scripted import ScriptedProvider
from tests.handoff_support import get_message
from tests.helpers import eventually
from tests.runtime_support import start_task, text
from tests.stack import Stack, running_stack

UNSCRIPTED = ("extract", "summarize", "summarize_episode", "route")


def _provider() -> ScriptedProvider:
    return ScriptedProvider([text("Noted.")] * 30, unscripted=UNSCRIPTED)


def _saw(requests: list[ModelRequest], words: str) -> bool:
    return any(words in repr(r.messages) for r in requests)


async def _status(st: Stack, tid: str, status: str) -> Any:
    t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
    return t if t["status"] == status else None


async def _idle_task(st: Stack, client: Client, queue: str, goal: str) -> str:
    tid, _ = await start_task(client, st.db, queue, st.user_id, goal, kind="persistent")
    await eventually(lambda: _status(st, tid, "waiting_user"), within=60)
    return tid


async def _control(st: Stack, tid: str, what: str) -> None:
    r = await st.api.post(f"/v1/tasks/{tid}/{what}", headers=st.auth)
    assert r.status_code == 200, r.text


async def _send(st: Stack, tid: str, words: str) -> str:
    r = await st.api.post(f"/v1/tasks/{tid}/messages", json={"text": words}, headers=st.auth)
    assert r.status_code == 202, r.text
    return str(r.json()["message_id"])


async def _state(st: Stack, mid: str, state: str) -> Any:
    m = await get_message(st, mid)
    return m if m["state"] == state else None


async def _listed(st: Stack, tid: str) -> dict[str, Any]:
    r = await st.api.get(f"/v1/tasks/{tid}/messages", headers=st.auth)
    assert r.status_code == 200, r.text
    return {m["message_id"]: m for m in r.json()["messages"]}


async def test_an_unread_message_is_withdrawn_and_a_read_one_is_not(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    provider = _provider()
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid = await _idle_task(st, temporal_client, task_queue, "Collect poster ideas")
        await _control(st, tid, "pause")
        await eventually(lambda: _status(st, tid, "paused"))
        mid = await _send(st, tid, "use neon green everywhere")
        # Its task's workflow has it, unread while the task is paused.
        await eventually(lambda: _state(st, mid, "received"), within=30)
        r = await st.api.delete(f"/v1/messages/{mid}", headers=st.auth)
        assert r.status_code == 200, r.text
        assert r.json()["state"] == "withdrawn" and r.json()["withdrawn"] is True
        again = await st.api.delete(f"/v1/messages/{mid}", headers=st.auth)
        assert again.status_code == 200 and again.json()["state"] == "withdrawn"

        await _control(st, tid, "resume")
        later = await _send(st, tid, "and a second idea")
        await eventually(lambda: _state(st, later, "read"), within=60)
        await eventually(lambda: _status(st, tid, "waiting_user"))
        assert not _saw(provider.requests, "neon green")
        assert _saw(provider.requests, "a second idea")
        gone = await get_message(st, mid)
        assert gone["state"] == "withdrawn" and "processed" not in gone
        # Read: too late to withdraw.
        r = await st.api.delete(f"/v1/messages/{later}", headers=st.auth)
        assert r.status_code == 409 and r.json()["error"] == "already_read", r.text
        listed = await _listed(st, tid)
        assert listed[mid]["state"] == "withdrawn" and listed[later]["state"] == "read"
        thread = (await st.api.get("/v1/thread", headers=st.auth)).json()["items"]
        said = {i["message_id"]: i for i in thread if i["type"] == "message.received"}
        assert said[mid]["state"] == "withdrawn" and said[later]["state"] == "read"
        other = await st.api.delete("/v1/messages/msg_nope", headers=st.auth)
        assert other.status_code == 404


async def test_a_read_message_moves_and_both_tasks_are_told(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    provider = _provider()
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        flyer = await _idle_task(st, temporal_client, task_queue, "Design the concert flyer")
        posters = await _idle_task(st, temporal_client, task_queue, "Retro brand posters")
        mid = await _send(st, flyer, "make the sun orange and bigger")
        await eventually(lambda: _state(st, mid, "read"), within=60)
        await eventually(lambda: _status(st, flyer, "waiting_user"))

        r = await st.api.post(
            f"/v1/messages/{mid}/move", json={"task_id": posters}, headers=st.auth
        )
        assert r.status_code == 200, r.text
        moved = r.json()
        assert moved["state"] == "moved" and moved["moved_to"]["task_id"] == posters
        copy = moved["moved_to"]["message_id"]
        got = await eventually(lambda: _state(st, copy, "read"), within=60)
        assert got["moved_from"] == mid and got["task_id"] == posters
        # The task it left got a notice (not the person's words) and no listing shows it.

        async def noticed() -> Any:
            return _saw(provider.requests, "Notice, not from the person") or None

        await eventually(noticed, within=60)
        flyer_list = await _listed(st, flyer)
        assert flyer_list[mid]["state"] == "moved"
        assert not any(m["text"].startswith("[Notice") for m in flyer_list.values())
        assert copy in await _listed(st, posters)
        # Moved once: a second move, or a withdrawal, is refused.
        r = await st.api.post(f"/v1/messages/{mid}/move", json={"task_id": flyer}, headers=st.auth)
        assert r.status_code == 409 and r.json()["error"] == "taken_back"
        r = await st.api.delete(f"/v1/messages/{mid}", headers=st.auth)
        assert r.status_code == 409 and r.json()["error"] == "taken_back"


async def test_an_unread_message_moves_before_its_task_reads_it(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    provider = _provider()
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        flyer = await _idle_task(st, temporal_client, task_queue, "Design the concert flyer")
        posters = await _idle_task(st, temporal_client, task_queue, "Retro brand posters")
        await _control(st, flyer, "pause")
        await eventually(lambda: _status(st, flyer, "paused"))
        mid = await _send(st, flyer, "put the logo bottom left on every poster")
        r = await st.api.post(
            f"/v1/messages/{mid}/move", json={"task_id": posters}, headers=st.auth
        )
        assert r.status_code == 200, r.text
        copy = r.json()["moved_to"]["message_id"]
        await eventually(lambda: _state(st, copy, "read"), within=60)
        await _control(st, flyer, "resume")
        marker = await _send(st, flyer, "a flyer note")
        await eventually(lambda: _state(st, marker, "read"), within=60)
        # The flyer task never saw it; the posters task did, once.
        flyer_saw = [q for q in provider.requests if "concert flyer" in repr(q.messages)]
        assert flyer_saw and not _saw(flyer_saw, "logo bottom left")
        assert not _saw(flyer_saw, "Notice, not from the person")
        assert (await get_message(st, mid))["state"] == "moved"
        same = await st.api.post(
            f"/v1/messages/{copy}/move", json={"task_id": posters}, headers=st.auth
        )
        assert same.status_code == 400


async def test_main_moves_the_previous_message_to_the_task_named(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """ "That was meant for the posters" to main: the previous message goes there (the
    stand-in router recognises the move by meaning and names the task by its words)."""
    provider = _provider()
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        flyer = await _idle_task(st, temporal_client, task_queue, "Design the concert flyer")
        posters = await _idle_task(st, temporal_client, task_queue, "Retro brand posters")
        mid = await _send(st, flyer, "add a big orange sun in the corner")
        await eventually(lambda: _state(st, mid, "read"), within=60)
        r = await st.api.post(
            "/v1/messages", json={"text": "That was meant for the posters"}, headers=st.auth
        )
        said = r.json()["message_id"]
        moved = await eventually(lambda: _state(st, mid, "moved"), within=60)
        assert moved["moved_to"]["task_id"] == posters
        copy = moved["moved_to"]["message_id"]
        await eventually(lambda: _state(st, copy, "read"), within=60)
        instruction = await get_message(st, said)
        assert instruction["routing"]["decision"] == "move" and "task_id" not in instruction

        async def noticed() -> Any:
            return _saw(provider.requests, "Notice, not from the person") or None

        await eventually(noticed, within=60)
        thread = (await st.api.get("/v1/thread", headers=st.auth)).json()["items"]
        assert any(i["type"] == "task.reply" and "Moved to" in i.get("text", "") for i in thread)


RACE_ROUNDS = 8


async def test_withdrawing_while_the_task_reads_ends_in_exactly_one(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """A message sent to an idle task and withdrawn at once, round after round: the task
    picks it up within milliseconds, so each round races the withdrawal against its model
    step. The api's answer and what the task did agree: 200 and the model never saw it, or
    409 `already_read` and it was read."""
    provider = ScriptedProvider([text("Noted.")] * (RACE_ROUNDS + 5), unscripted=UNSCRIPTED)
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid = await _idle_task(st, temporal_client, task_queue, "Collect poster ideas")
        answers: dict[str, int] = {}
        for i in range(RACE_ROUNDS):
            mid = await _send(st, tid, f"idea number {i} of the race")
            r = await st.api.delete(f"/v1/messages/{mid}", headers=st.auth)
            assert r.status_code in (200, 409), r.text
            answers[mid] = r.status_code
        barrier = await _send(st, tid, "the last word")
        await eventually(lambda: _state(st, barrier, "read"), within=60)
        for i, (mid, status) in enumerate(answers.items()):
            m = await get_message(st, mid)
            seen = _saw(provider.requests, f"idea number {i} of the race")
            if status == 200:
                assert m["state"] == "withdrawn" and "processed" not in m and not seen
            else:
                assert m["state"] == "read" and m["processed"] and seen

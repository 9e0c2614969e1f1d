"""The agent's side of the workspace through the real tools (`Tool.run` with a
`ToolCallContext`), the person's side over real HTTP: change notices, no second
storyboard, retried calls applied once, deletion by card only."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from lomo.db.models import ObjectVersion, Task, TaskObject, WorkObject
from lomo.ids import new_id
from tests.test_workspace_occ import Env, workspace_env
from tools.base import ToolCallContext
from workspace.notices import notices_for_context

STORYBOARD = (
    "# Storyboard: cat film\n"
    "## Shot 1\nA red tabby wakes up on a windowsill, warm morning light.\n"
    "## Shot 2\nThe cat stretches and looks at a bird outside.\n"
    "## Shot 3\nThe cat jumps down and walks out of frame.\n"
)


@pytest.fixture
async def env(db_url: str, tmp_path: Path) -> AsyncIterator[Env]:
    async with workspace_env(db_url, tmp_path) as e:
        yield e


async def _notices(env: Env) -> list[str]:
    async with env.db.session() as s:
        return await notices_for_context(s, env.task_id)


async def _create(env: Env, type_: str, name: str, content: dict[str, object]) -> str:
    r = await env.api.post(
        "/v1/objects", json={"type": type_, "name": name, "content": content}, headers=env.auth
    )
    assert r.status_code == 201, r.text
    return str(r.json()["object_id"])


async def _put(env: Env, oid: str, base: int, text: str) -> int:
    r = await env.api.put(
        f"/v1/objects/{oid}",
        json={"base_version": base, "content": {"text": text}},
        headers=env.auth,
    )
    assert r.status_code == 200, r.text
    return int(r.json()["version"])


async def test_abb10_refused_stale_write_then_reread_lands_as_v5_with_both_changes(
    env: Env,
) -> None:
    oid = await _create(env, "document", "storyboard", {"text": STORYBOARD})
    text = STORYBOARD.replace("warm morning light", "golden morning light")
    await _put(env, oid, 1, text)
    await _put(env, oid, 2, text.replace("red tabby", "ginger tabby"))
    # The agent reads v3.
    read = await env.tools["read_object"].run(env.ctx(), {"object_id": oid})
    assert read.status == "done" and read.result["version"] == 3
    v3 = read.result["text"]
    # The person saves v4 over HTTP (shot 2 changed) — the agent is not woken; it is told
    # at its next context.
    person = v3.replace("looks at a bird outside", "watches snow falling outside")
    assert await _put(env, oid, 3, person) == 4
    notes = await _notices(env)
    assert notes == [
        f"storyboard ({oid}) v3 → v4 (by the person): Shot 2 changed (+1/-1 lines); "
        "re-read it before editing"
    ]
    # The agent commits its v3-based change to shot 3: refused, told what changed.
    agent_change = ("walks out of frame", "walks toward the camera")
    stale = await env.tools["write_object"].run(
        env.ctx(),
        {"object_id": oid, "base_version": 3, "text": v3.replace(*agent_change)},
    )
    assert stale.status == "error"
    assert stale.result["code"] == "version_conflict" and stale.result["current_version"] == 4
    assert "Shot 2 changed" in stale.result["error"] and "the person" in stale.result["error"]
    assert "Re-read it with read_object" in stale.result["error"]
    # It re-reads v4 (the notice is gone) and writes again, based on v4.
    again = await env.tools["read_object"].run(env.ctx(), {"object_id": oid})
    assert again.result["version"] == 4 and "snow falling" in again.result["text"]
    assert await _notices(env) == []
    ctx = env.ctx()
    ok = await env.tools["write_object"].run(
        ctx,
        {"object_id": oid, "base_version": 4, "text": again.result["text"].replace(*agent_change)},
    )
    assert ok.status == "done" and ok.result["version"] == 5 and ok.made_progress
    body = (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).json()
    assert body["version"] == 5
    assert "watches snow falling" in body["content"]["text"]  # the person's change
    assert "walks toward the camera" in body["content"]["text"]  # the agent's change
    assert body["created_by"] == f"task:{env.task_id}:{ctx.call_id}"
    assert body["task_ids"] == [env.task_id]
    async with env.db.session() as s:
        link = await s.get(TaskObject, (env.task_id, oid))
        assert link is not None and link.role == "artifact" and link.seen_version == 5
    assert await _notices(env) == []  # its own write is nothing new to the task
    hist = (await env.api.get(f"/v1/objects/{oid}/versions", headers=env.auth)).json()
    assert [v["version"] for v in hist["versions"]] == [1, 2, 3, 4, 5]  # every version kept
    v3_again = (await env.api.get(f"/v1/objects/{oid}?version=3", headers=env.auth)).json()
    assert v3_again["content"]["text"] == v3


async def test_storyboard_edited_mid_run_is_a_notice_and_no_second_storyboard(env: Env) -> None:
    made = await env.tools["create_document"].run(
        env.ctx(), {"name": "storyboard", "text": STORYBOARD}
    )
    assert made.status == "done"
    oid = made.result["object_id"]
    assert await _notices(env) == []
    # Mid-run, the person edits shot 2 with a snippet edit.
    r = await env.api.patch(
        f"/v1/objects/{oid}",
        json={"edits": [{"old": "looks at a bird outside", "new": "chases a butterfly"}]},
        headers=env.auth,
    )
    assert r.status_code == 200 and r.json()["version"] == 2
    expected = [
        f"storyboard ({oid}) v1 → v2 (by the person): Shot 2 changed (+1/-1 lines); "
        "re-read it before editing"
    ]
    assert await _notices(env) == expected
    assert await _notices(env) == expected  # durable: still there until the task reads v2
    # The agent, planning from its old context, asks for a storyboard again: it gets the
    # existing one back, with a pointer to read it, and no second object exists.
    again = await env.tools["create_document"].run(
        env.ctx(), {"name": "storyboard", "text": STORYBOARD}
    )
    assert again.status == "done" and again.result["existing"] is True
    assert again.result["object_id"] == oid and again.result["version"] == 2
    async with env.db.session() as s:
        count = await s.scalar(select(func.count()).select_from(WorkObject))
    assert count == 1
    assert await _notices(env) == expected  # answering "exists" is not reading it
    read = await env.tools["read_object"].run(env.ctx(), {"object_id": oid})
    assert "chases a butterfly" in read.result["text"]
    assert await _notices(env) == []


async def test_a_retried_call_applies_once(env: Env) -> None:
    ctx = env.ctx()
    first = await env.tools["create_document"].run(ctx, {"name": "notes", "text": "a b c"})
    retry = await env.tools["create_document"].run(ctx, {"name": "notes", "text": "a b c"})
    assert retry.result["object_id"] == first.result["object_id"]
    assert retry.result["version"] == 1 and "already been applied" in retry.result["note"]
    oid = first.result["object_id"]
    edit = env.ctx()
    args = {"object_id": oid, "base_version": 1, "edits": [{"old": "b", "new": "B"}]}
    one = await env.tools["edit_document"].run(edit, args)
    # The same call again (a worker crashed after the commit, Temporal retried): nothing is
    # applied twice, and the answer is the first one, not a conflict with itself.
    two = await env.tools["edit_document"].run(edit, args)
    assert one.status == two.status == "done"
    assert one.result["version"] == two.result["version"] == 2
    assert "already been applied" in two.result["note"] and not two.made_progress
    async with env.db.session() as s:
        versions = list(
            await s.scalars(select(ObjectVersion.call_id).where(ObjectVersion.object_id == oid))
        )
    assert set(versions) == {ctx.call_id, edit.call_id} and len(versions) == 2


async def test_refused_snippet_edits_and_unread_full_writes(env: Env) -> None:
    oid = await _create(env, "document", "d", {"text": "cat cat dog"})
    res = await env.tools["edit_document"].run(
        env.ctx(), {"object_id": oid, "edits": [{"old": "cat", "new": "x"}]}
    )
    assert res.status == "error" and res.result["code"] == "edit_refused"
    assert "found 2 times" in res.result["error"]
    # Never overwrite what the task has not read, even with the right version number.
    blind = await env.tools["write_object"].run(
        env.ctx(), {"object_id": oid, "base_version": 1, "text": "mine"}
    )
    assert blind.status == "error" and "not read version 1" in blind.result["error"]
    body = (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).json()
    assert body["version"] == 1 and body["content"]["text"] == "cat cat dog"


async def test_deletion_only_by_confirmed_card_then_references_answer_deleted(env: Env) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 64
    oid = await _create(
        env,
        "asset",
        "cat.png",
        {"media_type": "image/png", "data_base64": base64.b64encode(png).decode()},
    )
    blob = await env.api.get(f"/v1/objects/{oid}/blob", headers=env.auth)
    assert blob.content == png and blob.headers["content-type"] == "image/png"
    await env.tools["read_object"].run(env.ctx(), {"object_id": oid})  # the task references it
    # A person's delete request only opens a card; rejecting it keeps the object.
    r = await env.api.delete(f"/v1/objects/{oid}", headers=env.auth)
    assert r.status_code == 202
    card = r.json()["card_id"]
    assert (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).status_code == 200
    r = await env.api.post(f"/v1/cards/{card}/actions", json={"action": "reject"}, headers=env.auth)
    assert r.status_code == 200
    assert (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).status_code == 200
    # The agent cannot delete: its tool opens a card for the person and waits.
    asked = await env.tools["delete_object"].run(env.ctx(), {"object_id": oid})
    assert asked.status == "needs_confirmation" and asked.card_id
    assert (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).status_code == 200
    # A new card every time; confirming one deletes for good.
    card2 = (await env.api.delete(f"/v1/objects/{oid}", headers=env.auth)).json()["card_id"]
    assert card2 != card
    r = await env.api.post(
        f"/v1/cards/{card2}/actions", json={"action": "confirm"}, headers=env.auth
    )
    assert r.status_code == 200
    gone = await env.api.get(f"/v1/objects/{oid}", headers=env.auth)
    assert gone.status_code == 404 and gone.json()["error"] == "deleted"
    assert "deleted by the person" in gone.json()["detail"]
    assert (await env.api.get(f"/v1/objects/{oid}/blob", headers=env.auth)).status_code == 404
    listed = (await env.api.get("/v1/objects", headers=env.auth)).json()["objects"]
    assert oid not in [o["object_id"] for o in listed]
    put = await env.api.put(
        f"/v1/objects/{oid}", json={"base_version": 1, "content": {}}, headers=env.auth
    )
    assert put.status_code == 404 and put.json()["error"] == "deleted"
    async with env.db.session() as s:
        ver = await s.get(ObjectVersion, (oid, 1))
        assert ver is not None and ver.blob_path is None and ver.content == {}
    assert not list((env.tmp / "a" / oid).glob("*"))
    # The task is told once, in its context, then by the tool when it looks.
    notes = await _notices(env)
    assert notes == [
        f"cat.png ({oid}) was deleted by the person; it can no longer be read or used, do not "
        "refer to it"
    ]
    res = await env.tools["read_object"].run(env.ctx(), {"object_id": oid})
    assert res.status == "error" and res.result["deleted"] is True
    assert "was deleted by the person" in res.result["error"]
    assert await _notices(env) == []
    async with env.db.session() as s:
        link = await s.get(TaskObject, (env.task_id, oid))
        assert link is not None and link.deletion_seen
    edit = await env.tools["edit_document"].run(
        env.ctx(), {"object_id": oid, "edits": [{"old": "a", "new": "b"}]}
    )
    assert edit.status == "error" and edit.result["deleted"] is True


async def test_two_attempts_of_one_call_racing_write_at_most_once(env: Env) -> None:
    """Attempts of one call running at once (a stale activity attempt and its retry: fault
    injection): exactly one writes; the others wait for the object's lock, find the call's
    version and answer with it, never with a refusal of the change that landed."""
    oid = await _create(env, "document", "d", {"text": "alpha beta gamma"})
    ctx = env.ctx()
    args = {"object_id": oid, "edits": [{"old": "beta", "new": "BETA"}]}
    outcomes = await asyncio.gather(*(env.tools["edit_document"].run(ctx, args) for _ in range(4)))
    assert [o.status for o in outcomes] == ["done"] * 4
    assert {o.result["version"] for o in outcomes} == {2}
    assert sum(1 for o in outcomes if o.made_progress) == 1  # one applied, three replayed
    body = (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).json()
    assert body["version"] == 2 and body["content"]["text"] == "alpha BETA gamma"
    async with env.db.session() as s:
        n = await s.scalar(
            select(func.count()).select_from(ObjectVersion).where(ObjectVersion.object_id == oid)
        )
    assert n == 2


async def test_large_objects_are_summarized_and_read_on_demand(env: Env) -> None:
    nodes = {f"n{i:02d}": {"type": "image", "params": {"seed": i}, "inputs": []} for i in range(60)}
    flow = await _create(env, "flow", "big flow", {"nodes": nodes})
    read = await env.tools["read_object"].run(env.ctx(), {"object_id": flow})
    assert "nodes" not in read.result and len(read.result["overview"]) == 60
    part = await env.tools["read_object"].run(env.ctx(), {"object_id": flow, "nodes": ["n07"]})
    assert part.result["nodes"] == {"n07": nodes["n07"]}
    async with env.db.session() as s:
        link = await s.get(TaskObject, (env.task_id, flow))
        assert link is not None and link.role == "reference"  # read, not made, by the task
    # The person retunes 9 nodes: the notice names a few and counts the rest.
    changes = {f"n{i:02d}": {**nodes[f"n{i:02d}"], "params": {"seed": -i}} for i in range(1, 10)}
    r = await env.api.patch(
        f"/v1/objects/{flow}", json={"base_version": 1, "nodes": changes}, headers=env.auth
    )
    assert r.status_code == 200
    [note] = await _notices(env)
    assert note == (
        f"big flow ({flow}) v1 → v2 (by the person): node(s) n01 (params.seed), n02 "
        "(params.seed), n03 (params.seed), n04 (params.seed), n05 (params.seed) and 4 more "
        "changed; re-read it before editing"
    )
    long_text = "".join(f"paragraph {i}\n" * 20 for i in range(200))  # ~60 kB
    doc = await _create(env, "document", "script", {"text": long_text})
    page = await env.tools["read_object"].run(env.ctx(), {"object_id": doc})
    assert len(page.result["text"]) == 16_000
    nxt = page.result["page"]["next_offset"]
    page2 = await env.tools["read_object"].run(env.ctx(), {"object_id": doc, "offset": nxt})
    assert page2.result["text"] == long_text[16_000:32_000]


async def test_another_tasks_write_is_a_notice_naming_that_task(env: Env) -> None:
    oid = await _create(env, "document", "brief", {"text": "tone: warm\n"})
    await env.tools["read_object"].run(env.ctx(), {"object_id": oid})
    async with env.db.session() as s:
        other = Task(id=new_id("tsk"), user_id=env.user_id, kind="persistent")
        s.add(other)
    ctx = ToolCallContext(other.id, env.user_id, f"{other.id}:1:1:0", 1, 1, 0)
    res = await env.tools["edit_document"].run(
        ctx, {"object_id": oid, "edits": [{"old": "warm", "new": "cool"}]}
    )
    assert res.status == "done"
    assert await _notices(env) == [
        f"brief ({oid}) v1 → v2 (by task {other.id}): lines 1 changed (+1/-1 lines); "
        "re-read it before editing"
    ]
    async with env.db.session() as s:  # the writing task itself has nothing new to hear
        assert await notices_for_context(s, other.id) == []
    body = (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).json()
    assert sorted(body["task_ids"]) == sorted([env.task_id, other.id])  # shared, not copied

"""A work object's history over real HTTP, on SQLite and Postgres: the versions name the
task that made the agent's ones by its goal; the line diff between two versions of a
document or a flow; assets have none; a restore is a PUT of an old version's content
and is refused like any write on a version that moved on; lists say an asset's type."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.test_workspace_occ import Env, workspace_env

TEXT = "Shot 1: a harbour.\nShot 2: a dog.\nShot 3: boats."


@pytest.fixture
async def env(db_url: str, tmp_path: Path) -> AsyncIterator[Env]:
    async with workspace_env(db_url, tmp_path) as e:
        yield e


async def _document(env: Env) -> str:
    r = await env.api.post(
        "/v1/objects",
        json={"type": "document", "name": "board", "content": {"text": TEXT}},
        headers=env.auth,
    )
    return str(r.json()["object_id"])


async def test_versions_name_the_agents_task_and_diff_shows_changed_lines(env: Env) -> None:
    oid = await _document(env)
    res = await env.tools["edit_document"].run(
        env.ctx(),
        {"object_id": oid, "base_version": 1, "edits": [{"old": "a dog", "new": "a cat"}]},
    )
    assert res.status == "done", res.result
    hist = (await env.api.get(f"/v1/objects/{oid}/versions", headers=env.auth)).json()
    person, agent = hist["versions"]
    assert (person["task_id"], person["task_goal"]) == (None, None)
    assert (agent["task_id"], agent["task_goal"]) == (env.task_id, "storyboard")

    # No `from`: what the last version changed.
    d = (await env.api.get(f"/v1/objects/{oid}/diff", headers=env.auth)).json()
    assert (d["from_version"], d["to_version"], d["added"], d["removed"]) == (1, 2, 1, 1)
    (hunk,) = d["hunks"]
    assert [(x["op"], x["text"], x["old_line"], x["new_line"]) for x in hunk] == [
        ("equal", "Shot 1: a harbour.", 1, 1),
        ("removed", "Shot 2: a dog.", 2, None),
        ("added", "Shot 2: a cat.", None, 2),
        ("equal", "Shot 3: boats.", 3, 3),
    ]
    same = (await env.api.get(f"/v1/objects/{oid}/diff?from=2&to=2", headers=env.auth)).json()
    assert same["hunks"] == [] and same["added"] == same["removed"] == 0
    missing = await env.api.get(f"/v1/objects/{oid}/diff?from=9", headers=env.auth)
    assert missing.status_code == 404


async def test_restore_is_a_checked_write_of_the_old_content(env: Env) -> None:
    oid = await _document(env)
    for base, text in ((1, TEXT + "\nShot 4."), (2, "gone")):
        r = await env.api.put(
            f"/v1/objects/{oid}",
            json={"base_version": base, "content": {"text": text}},
            headers=env.auth,
        )
        assert r.status_code == 200
    old = (await env.api.get(f"/v1/objects/{oid}?version=1", headers=env.auth)).json()
    # On a version that moved on: refused, nothing written.
    late = await env.api.put(
        f"/v1/objects/{oid}",
        json={"base_version": 2, "content": old["content"]},
        headers=env.auth,
    )
    assert late.status_code == 409 and late.json()["current_version"] == 3
    ok = await env.api.put(
        f"/v1/objects/{oid}",
        json={"base_version": 3, "content": old["content"]},
        headers=env.auth,
    )
    assert ok.status_code == 200 and ok.json()["version"] == 4
    now = (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).json()
    assert now["content"]["text"] == TEXT
    d = (await env.api.get(f"/v1/objects/{oid}/diff?from=1", headers=env.auth)).json()
    assert d["hunks"] == []  # version 4 is version 1 again


async def test_flows_diff_as_json_assets_have_no_lines(env: Env) -> None:
    node = {"type": "image", "params": {"prompt": "a fox"}, "inputs": []}
    r = await env.api.post(
        "/v1/objects",
        json={"type": "flow", "name": "f", "content": {"nodes": {"fox": node}}},
        headers=env.auth,
    )
    fid = r.json()["object_id"]
    node2 = {**node, "params": {"prompt": "a red fox"}}
    r = await env.api.put(
        f"/v1/objects/{fid}",
        json={"base_version": 1, "content": {"nodes": {"fox": node2}}},
        headers=env.auth,
    )
    assert r.status_code == 200, r.text
    d = (await env.api.get(f"/v1/objects/{fid}/diff?from=1", headers=env.auth)).json()
    changed = [(x["op"], x["text"].strip()) for h in d["hunks"] for x in h if x["op"] != "equal"]
    assert changed == [("removed", '"prompt": "a fox"'), ("added", '"prompt": "a red fox"')]

    wav = base64.b64encode(b"RIFF0000WAVE").decode()
    a = await env.api.post(
        "/v1/objects",
        json={
            "type": "asset",
            "name": "jingle",
            "content": {"media_type": "audio/wav", "data_base64": wav},
        },
        headers=env.auth,
    )
    aid = a.json()["object_id"]
    assert (await env.api.get(f"/v1/objects/{aid}/diff", headers=env.auth)).status_code == 400
    listed = (await env.api.get("/v1/objects", headers=env.auth)).json()["objects"]
    types = {o["object_id"]: o["media_type"] for o in listed}
    assert types == {fid: None, aid: "audio/wav"}

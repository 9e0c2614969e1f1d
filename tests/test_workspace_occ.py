"""Optimistic concurrency of workspace writes, on SQLite and Postgres: racing writers,
200 person-vs-agent edits of one document over real HTTP and the real tools, flows."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from sqlalchemy import select
from temporalio.client import Client

from api.app import create_app
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.models import Event, ObjectVersion, Task
from lomo.errors import Conflict
from lomo.ids import new_id
from lomo.settings import Settings
from tests.helpers import ThreadServer
from tools.base import ToolCallContext, ToolDeps
from tools.workspace import workspace_tools
from workspace import store, writes


@dataclass
class Env:
    db: Database
    api: httpx.AsyncClient
    auth: dict[str, str]
    user_id: str
    task_id: str
    tools: dict[str, Any]
    tmp: Path
    calls: list[int] = field(default_factory=lambda: [0])

    def ctx(self) -> ToolCallContext:
        """A fresh call of the task's current step (call ids never repeat by accident)."""
        self.calls[0] += 1
        i = self.calls[0]
        return ToolCallContext(self.task_id, self.user_id, f"{self.task_id}:1:{i}:0", 1, i, 0)


@pytest.fixture
async def env(db_url: str, tmp_path: Path) -> AsyncIterator[Env]:
    async with workspace_env(db_url, tmp_path) as e:
        yield e


@asynccontextmanager
async def workspace_env(db_url: str, tmp_path: Path) -> AsyncIterator[Env]:
    """A user with one task, the real api over HTTP for the person, the tools for the agent."""
    settings = Settings(data_dir=tmp_path, database_url=db_url, model_provider="offline")
    db = Database(db_url)
    async with db.session() as s:
        user, token = await create_user(s, "person")
        task = Task(id=new_id("tsk"), user_id=user.id, kind="persistent", goal="storyboard")
        s.add(task)
    deps = ToolDeps(
        db=db, http=httpx.AsyncClient(), assets=store.AssetStore(tmp_path / "a"), settings=settings
    )
    # Object routes never touch Temporal; a card of a task would (see test_workspace_tools).
    app = create_app(settings, temporal=cast(Client, object()))
    with ThreadServer(app) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as api:
            yield Env(
                db,
                api,
                {"Authorization": f"Bearer {token}"},
                user.id,
                task.id,
                {t.name: t for t in workspace_tools(deps)},
                tmp_path,
            )
    await deps.http.aclose()
    await db.dispose()


async def test_racing_writers_on_one_base_exactly_one_wins(db: Database) -> None:
    async with db.session() as s:
        user, _ = await create_user(s, "w")
        obj = await store.create_object(s, user.id, "document", "doc", {"text": "v1"}, "user")

    async def write(i: int) -> str:
        try:
            async with db.session() as s:
                await writes.write_object(s, user.id, obj.id, 1, {"text": f"w{i}"}, f"writer{i}")
            return "ok"
        except Conflict as e:
            assert e.code == "version_conflict" and e.extra["current_version"] >= 2
            return "conflict"

    results = await asyncio.gather(*(write(i) for i in range(10)))
    assert results.count("ok") == 1 and results.count("conflict") == 9
    async with db.session() as s:
        o, v = await store.get_version(s, user.id, obj.id)
        assert o.version == 2 and v.content["text"].startswith("w")
        with pytest.raises(Conflict):
            await writes.write_object(s, user.id, obj.id, 1, {"text": "late"}, "user")
        # A refused write leaves no trace: no version, no gap in the numbering.
        versions = list(await s.scalars(select(ObjectVersion.version)))
        assert sorted(versions) == [1, 2]


N_EDITS = 200
WRITERS = 2  # the person over HTTP, the agent through its tools


def _line(i: int, state: str) -> str:
    return f"line {i:03d}: {state}"


def _edit(i: int) -> dict[str, str]:
    return {"old": _line(i, "old"), "new": _line(i, "new")}


async def test_200_parallel_edits_person_vs_agent(env: Env) -> None:
    """Every accepted write is based on the version it names (its predecessor), no accepted
    change is lost (each version differs from the previous by exactly its own edit), and
    every refusal is reported with the current version."""
    text = "\n".join(_line(i, "old") for i in range(N_EDITS))
    r = await env.api.post(
        "/v1/objects",
        json={"type": "document", "name": "notes", "content": {"text": text}},
        headers=env.auth,
    )
    oid = r.json()["object_id"]
    accepted: dict[int, tuple[int, int]] = {}  # version -> (base_version, line)
    refused: list[tuple[int, int]] = []  # (base_version, current_version reported)
    rng = random.Random(6)

    async def person_edit(i: int, full: bool) -> tuple[int, dict[str, Any], bool]:
        cur = (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).json()
        base, body = cur["version"], cur["content"]["text"]
        if full:
            new = body.replace(_line(i, "old"), _line(i, "new"))
            r = await env.api.put(
                f"/v1/objects/{oid}",
                json={"base_version": base, "content": {"text": new}},
                headers=env.auth,
            )
        else:
            r = await env.api.patch(
                f"/v1/objects/{oid}",
                json={"base_version": base, "edits": [_edit(i)]},
                headers=env.auth,
            )
        assert r.status_code in (200, 409), r.text
        return base, r.json(), r.status_code == 200

    async def agent_edit(i: int, full: bool) -> tuple[int, dict[str, Any], bool]:
        read = await env.tools["read_object"].run(env.ctx(), {"object_id": oid})
        base, body = read.result["version"], read.result["text"]
        if full:
            res = await env.tools["write_object"].run(
                env.ctx(),
                {
                    "object_id": oid,
                    "base_version": base,
                    "text": body.replace(_line(i, "old"), _line(i, "new")),
                },
            )
        else:
            res = await env.tools["edit_document"].run(
                env.ctx(),
                {"object_id": oid, "base_version": base, "edits": [_edit(i)]},
            )
        return base, res.result, res.status == "done"

    async def writer(w: int) -> None:
        for i in range(w, N_EDITS, WRITERS):
            full = rng.random() < 0.5
            while True:  # a refused edit is re-read and redone, as the agent must
                edit = person_edit if w == 0 else agent_edit
                base, out, ok = await edit(i, full)
                if ok:
                    assert out["version"] not in accepted
                    accepted[out["version"]] = (base, i)
                    break
                assert out["current_version"] > base, out
                assert "error" in out
                refused.append((base, out["current_version"]))

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))

    assert sorted(accepted) == list(range(2, N_EDITS + 2))
    assert refused, "two writers on one document must have collided at least once"
    async with env.db.session() as s:
        rows = {
            v.version: v
            for v in await s.scalars(select(ObjectVersion).where(ObjectVersion.object_id == oid))
        }
        events = list(
            await s.scalars(
                select(Event).where(Event.user_id == env.user_id, Event.type == "object.version")
            )
        )
    assert len(rows) == N_EDITS + 1
    for version, (base, i) in accepted.items():
        assert base == version - 1  # based on exactly the version it names
        before = rows[version - 1].content["text"].splitlines()
        after = rows[version].content["text"].splitlines()
        diff = [k for k, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        assert diff == [i] and after[i] == _line(i, "new")  # its own edit, nothing undone
    final = rows[N_EDITS + 1].content["text"]
    assert final == "\n".join(_line(i, "new") for i in range(N_EDITS))
    assert len(events) == N_EDITS + 1  # one object.version per version (creation included)
    authors = {rows[v].created_by.split(":")[0] for v in accepted}
    assert authors == {"user", "task"}


async def test_flow_different_nodes_both_land_same_node_refused(env: Env) -> None:
    nodes = {
        "prompt": {"type": "prompt", "params": {"text": "a cat"}, "inputs": []},
        "image": {"type": "image", "params": {"model": "sim-image-1"}, "inputs": ["prompt"]},
        "video": {"type": "video", "params": {"seconds": 5}, "inputs": ["image"]},
    }
    r = await env.api.post(
        "/v1/objects",
        json={"type": "flow", "name": "cat flow", "content": {"nodes": nodes}},
        headers=env.auth,
    )
    oid = r.json()["object_id"]
    read = await env.tools["read_object"].run(env.ctx(), {"object_id": oid})
    assert read.result["version"] == 1
    # The person changes the prompt node (autosave) ...
    r = await env.api.patch(
        f"/v1/objects/{oid}",
        json={"base_version": 1, "nodes": {"prompt": {**nodes["prompt"], "params": {"text": "x"}}}},
        headers=env.auth,
    )
    assert r.status_code == 200 and r.json()["version"] == 2
    # ... while the agent, still on v1, changes the video node: both land.
    res = await env.tools["edit_flow"].run(
        env.ctx(),
        {
            "object_id": oid,
            "base_version": 1,
            "nodes": {"video": {**nodes["video"], "params": {"seconds": 8}}},
        },
    )
    assert res.status == "done", res.result
    assert res.result["version"] == 3 and res.result["others_changed"] == ["prompt"]
    cur = (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).json()["content"]["nodes"]
    assert cur["prompt"]["params"] == {"text": "x"} and cur["video"]["params"] == {"seconds": 8}
    # The agent, still on v1, changes the prompt node the person changed: refused, told why.
    res = await env.tools["edit_flow"].run(
        env.ctx(),
        {
            "object_id": oid,
            "base_version": 1,
            "nodes": {"prompt": {**nodes["prompt"], "params": {"text": "a bird"}}},
        },
    )
    assert res.status == "error" and res.result["nodes"] == ["prompt"]
    assert "re-read" in res.result["error"].lower()
    # The person, on v1 too, changes the video node the agent changed: refused (409).
    r = await env.api.patch(
        f"/v1/objects/{oid}",
        json={"base_version": 1, "nodes": {"video": None}},
        headers=env.auth,
    )
    assert r.status_code == 409 and r.json()["error"] == "node_conflict"
    assert r.json()["nodes"] == ["video"]
    body = (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).json()
    assert body["version"] == 3 and body["content"]["nodes"] == cur  # nothing applied


async def test_full_write_of_an_old_version_is_409_with_current_version(env: Env) -> None:
    r = await env.api.post(
        "/v1/objects",
        json={"type": "document", "name": "d", "content": {"text": "one"}},
        headers=env.auth,
    )
    oid = r.json()["object_id"]
    ok = await env.api.put(
        f"/v1/objects/{oid}", json={"base_version": 1, "content": {"text": "two"}}, headers=env.auth
    )
    assert ok.status_code == 200 and ok.json()["version"] == 2
    late = await env.api.put(
        f"/v1/objects/{oid}", json={"base_version": 1, "content": {"text": "x"}}, headers=env.auth
    )
    assert late.status_code == 409
    assert late.json()["error"] == "version_conflict" and late.json()["current_version"] == 2
    # A snippet edit that does not match exactly once: 409, nothing applied.
    bad = await env.api.patch(
        f"/v1/objects/{oid}",
        json={"edits": [{"old": "two", "new": "2"}, {"old": "three", "new": "3"}]},
        headers=env.auth,
    )
    assert bad.status_code == 409 and bad.json()["error"] == "edit_refused"
    body = (await env.api.get(f"/v1/objects/{oid}", headers=env.auth)).json()
    assert body["version"] == 2 and body["content"]["text"] == "two"
    hist = (await env.api.get(f"/v1/objects/{oid}/versions", headers=env.auth)).json()
    assert [v["created_by"] for v in hist["versions"]] == ["user", "user"]

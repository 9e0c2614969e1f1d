"""Every list of the api comes a page at a time, on both databases: at most `limit` rows
(50 unless asked, 200 at most), a stable order with ties broken by id, and `next` the cursor
of the following page (null on the last). Walking the pages gives every row exactly once.
A bad `limit` or `cursor`, or a cursor taken from another list or another person, is 422."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from api.app import create_app
from api.services.pages import DEFAULT_LIMIT, MAX_LIMIT
from flows.models import FlowRun
from lomo.auth import create_api_token, create_user
from lomo.db.engine import Database
from lomo.db.models import Card, ObjectVersion, Task, WorkObject
from lomo.events import append_event
from lomo.settings import Settings
from memory.models import Memory, MemoryVersion
from tests.helpers import ThreadServer

N = 7  # rows per list; pages of 3 make three pages, the last one short
SAME = datetime(2026, 1, 1, tzinfo=UTC)  # the first rows share one instant: ties need the id


@dataclass
class Api:
    http: httpx.AsyncClient
    a: dict[str, str]
    b: dict[str, str]
    ids: dict[str, list[str]]  # what each list must show, in its order
    other: dict[str, str]  # an id of each kind that is bob's


def _at(i: int) -> datetime:
    return SAME if i < 4 else SAME + timedelta(minutes=i)


async def _seed(s: AsyncSession, user_id: str, tag: str) -> dict[str, list[str]]:
    """N rows of each listed kind; a flow with N runs, a document and a memory with N
    versions. Ids are made so that their order differs from the insertion order."""
    ids: dict[str, list[str]] = {k: [] for k in ("tasks", "cards", "objects", "runs", "memory")}
    flow = WorkObject(id=f"obj_{tag}flow", user_id=user_id, type="flow", name="f", version=N)
    flow.created_at = SAME - timedelta(days=1)
    s.add(flow)
    s.add(
        Memory(
            id=f"mem_{tag}hist",
            user_id=user_id,
            kind="stated",
            scope="profile",
            subject="s",
            attribute="h",
            status="deleted",
            current_version=N,
        )
    )
    await s.flush()
    for i in range(N):
        key = f"{tag}{(i * 5) % N}{i}"  # not in i's order
        s.add(Task(id=f"tsk_{key}", user_id=user_id, kind="persistent", created_at=_at(i)))
        s.add(Card(id=f"crd_{key}", user_id=user_id, kind="confirm", title="t", created_at=_at(i)))
        s.add(
            WorkObject(
                id=f"obj_{key}", user_id=user_id, type="document", name=key, created_at=_at(i)
            )
        )
        s.add(
            FlowRun(id=f"run_{key}", user_id=user_id, flow_id=flow.id, version=1, created_at=_at(i))
        )
        s.add(
            Memory(
                id=f"mem_{key}",
                user_id=user_id,
                kind="stated",
                scope="profile",
                subject="s",
                attribute=key,
                created_at=_at(i),
            )
        )
        s.add(
            MemoryVersion(
                id=f"mv_{key}",
                memory_id=f"mem_{key}",
                user_id=user_id,
                version=1,
                content=key,
                relation="ORIGIN",
            )
        )
        s.add(
            MemoryVersion(
                id=f"mvh_{key}",
                memory_id=f"mem_{tag}hist",
                user_id=user_id,
                version=i + 1,
                content=key,
                relation="CHANGE",
                status="superseded",
            )
        )
        s.add(
            ObjectVersion(
                object_id=flow.id, version=i + 1, content={"nodes": {}}, created_by="user"
            )
        )
        for kind, prefix in (
            ("tasks", "tsk"),
            ("cards", "crd"),
            ("objects", "obj"),
            ("runs", "run"),
            ("memory", "mem"),
        ):
            ids[kind].append(f"{prefix}_{key}")
        await s.flush()
        await append_event(s, user_id, "task.created", {"task_id": f"tsk_{key}"})
        row, _ = await create_api_token(s, user_id, key, timedelta(days=1))
        row.created_at = _at(i)
        ids.setdefault("tokens", []).append(row.id)
    # The expected order: by (created_at, id), newest first for tasks and runs.
    by_time = sorted(range(N), key=lambda i: (_at(i), ids["tasks"][i][4:]))
    tokens = sorted(range(N), key=lambda i: (_at(i), ids["tokens"][i]))
    ids["tokens"] = [ids["tokens"][i] for i in tokens]
    for kind in ("tasks", "cards", "objects", "runs", "memory"):
        ordered = [ids[kind][i] for i in by_time]
        ids[kind] = ordered[::-1] if kind in ("tasks", "runs") else ordered
    ids["objects"] = [flow.id, *ids["objects"]]
    ids["versions"] = [str(v) for v in range(1, N + 1)]
    ids["history"] = [str(v) for v in range(1, N + 1)]
    return ids


@pytest.fixture
async def api(
    tmp_path: Path, db_url: str, temporal_server: str, task_queue: str
) -> AsyncIterator[Api]:
    settings = Settings(
        data_dir=tmp_path,
        database_url=db_url,
        temporal_address=temporal_server,
        task_queue=task_queue,
        model_provider="offline",
        rate_limit_per_minute=0,
    )
    db = Database(db_url)
    async with db.session() as s:
        alice, token_a = await create_user(s, "alice")
        bob, token_b = await create_user(s, "bob")
        await s.flush()
        ids = await _seed(s, alice.id, "a")
        bobs = await _seed(s, bob.id, "b")
    other = {kind: rows[0] for kind, rows in bobs.items()}
    with ThreadServer(create_app(settings)) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as http:
            yield Api(
                http,
                {"Authorization": f"Bearer {token_a}"},
                {"Authorization": f"Bearer {token_b}"},
                ids,
                other,
            )
    await db.dispose()


# list name -> (path, the answer's list key, the id of one row)
LISTS: dict[str, tuple[str, str, Callable[[dict[str, Any]], str]]] = {
    "tasks": ("/v1/tasks", "tasks", lambda r: r["task_id"]),
    "cards": ("/v1/cards", "cards", lambda r: r["card_id"]),
    "objects": ("/v1/objects", "objects", lambda r: r["object_id"]),
    "runs": ("/v1/objects/obj_aflow/runs", "runs", lambda r: r["run_id"]),
    "memory": ("/v1/memory", "memories", lambda r: r["memory_id"]),
    "versions": ("/v1/objects/obj_aflow/versions", "versions", lambda r: str(r["version"])),
    "history": ("/v1/memory/mem_ahist/history", "versions", lambda r: str(r["version"])),
    "tokens": ("/v1/tokens", "tokens", lambda r: r["token_id"]),
}


async def _walk(api: Api, name: str, limit: int) -> tuple[list[str], int]:
    path, key, ident = LISTS[name]
    seen: list[str] = []
    params: dict[str, Any] = {"limit": limit}
    for pages in range(1, 100):
        r = await api.http.get(path, params=params, headers=api.a)
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body[key]) <= limit
        seen += [ident(row) for row in body[key]]
        if body["next"] is None:
            return seen, pages
        params["cursor"] = body["next"]
    raise AssertionError("the pages never ended")


@pytest.mark.parametrize("name", list(LISTS))
async def test_walking_the_pages_shows_every_row_once_in_order(api: Api, name: str) -> None:
    seen, pages = await _walk(api, name, 3)
    assert seen == api.ids[name]
    assert pages == -(-len(api.ids[name]) // 3)
    whole, pages = await _walk(api, name, MAX_LIMIT)
    assert (whole, pages) == (api.ids[name], 1)


async def test_a_long_list_answers_one_default_page(api: Api) -> None:
    r = await api.http.get("/v1/tasks", params={"limit": 2}, headers=api.a)
    assert len(r.json()["tasks"]) == 2 and r.json()["next"]
    r = await api.http.get("/v1/tasks", headers=api.a)
    assert len(r.json()["tasks"]) == min(N, DEFAULT_LIMIT)


async def test_the_thread_says_where_its_next_page_starts(api: Api) -> None:
    seqs: list[int] = []
    after: int | None = 0
    while after is not None:
        r = await api.http.get("/v1/thread", params={"after": after, "limit": 3}, headers=api.a)
        assert r.status_code == 200, r.text
        seqs += [i["seq"] for i in r.json()["items"]]
        after = r.json()["next"]
    assert seqs == sorted(set(seqs)) and len(seqs) == N


def _error(r: httpx.Response, code: str) -> None:
    assert r.status_code == 422, (r.status_code, r.text)
    body = r.json()
    assert body["error"] == code and body["detail"], body


@pytest.mark.parametrize("name", list(LISTS))
async def test_bad_limits_and_cursors_are_422(api: Api, name: str) -> None:
    path = LISTS[name][0]
    for limit in (0, -1, MAX_LIMIT + 1, "many"):
        _error(await api.http.get(path, params={"limit": limit}, headers=api.a), "validation_error")
    for cursor in ("!!!", "x" * 121, "%00", "dGFza19ub3BlIQ"):  # the last: "task_nope!"
        r = await api.http.get(path, params={"cursor": cursor}, headers=api.a)
        _error(r, "validation_error" if len(cursor) > 120 else "invalid_cursor")


async def _cursor_for(api: Api, name: str, headers: dict[str, str], path: str) -> str:
    r = await api.http.get(path, params={"limit": 1}, headers=headers)
    cursor: str = r.json()["next"]
    assert cursor
    return cursor


@pytest.mark.parametrize("name", ["tasks", "cards", "objects", "memory", "tokens"])
async def test_a_cursor_from_another_person_or_list_is_refused(api: Api, name: str) -> None:
    path = LISTS[name][0]
    bobs = await _cursor_for(api, name, api.b, path)
    r = await api.http.get(path, params={"cursor": bobs}, headers=api.a)
    _error(r, "invalid_cursor")  # as a made-up one: bob's rows are not alice's to page by
    other = "cards" if name != "cards" else "tasks"
    foreign = await _cursor_for(api, other, api.a, LISTS[other][0])
    _error(await api.http.get(path, params={"cursor": foreign}, headers=api.a), "invalid_cursor")

"""The memory service through its real path: the api, the person's MemoryWorkflow on a real
Temporal dev server, the worker's activities, the offline extractor, the embedded engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select
from temporalio.client import Client
from temporalio.worker import Replayer

from api.dispatch.memory import request_extraction, workflow_id
from cli.worker import WORKFLOWS
from llm.types import ModelRequest, ModelResponse
from lomo.db.models import Event, MessageRow
from lomo.errors import ModelError
from lomo.ids import new_id
from memory.context import memory_for_context
from memory.models import Evidence
from memory.services import close_services, get_services
from memory.types import MemoryInput
from standin.extract import offline_extract
from tests.helpers import eventually
from tests.stack import Stack, running_stack
from tools.base import ToolDeps
from workflows.memory import MemoryWorkflow
from workspace.store import AssetStore

BLUE = "Our brand's main colour is blue."
CREAM = "Blue with cream white feels softer overall."


async def _say(st: Stack, client: Client, text: str) -> str:
    mid = new_id("msg")
    async with st.db.session() as s:
        s.add(MessageRow(id=mid, user_id=st.user_id, text=text))
    await request_extraction(client, st.settings, st.user_id, mid)
    return mid


async def _memories(st: Stack) -> list[dict[str, Any]]:
    r = await st.api.get("/v1/memory", headers=st.auth)
    assert r.status_code == 200, r.text
    return list(r.json()["memories"])


async def _extracted(st: Stack, mid: str) -> bool:
    async with st.db.session() as s:
        ev = await s.scalar(select(Evidence).where(Evidence.message_id == mid))
        return ev is not None and ev.extracted_at is not None


async def test_article_example_end_to_end(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        embedder="fake",  # the stand-in model (offline) extracts through offline_extract
    ) as st:
        await _say(st, temporal_client, BLUE)
        [m1] = await eventually(_memories_with(st, 1))
        assert (m1["version"], m1["relation"], m1["kind"], m1["scope"]) == (
            1,
            "ORIGIN",
            "stated",
            "profile",
        )
        await _say(st, temporal_client, CREAM)
        [m2] = await eventually(_memories_with(st, 2))
        assert m2["memory_id"] == m1["memory_id"] and m2["relation"] == "REFINE"
        hist = (await st.api.get(f"/v1/memory/{m1['memory_id']}/history", headers=st.auth)).json()
        assert [(v["version"], v["status"]) for v in hist["versions"]] == [
            (1, "superseded"),
            (2, "active"),
        ]
        prof = (await st.api.get("/v1/memory/profile", headers=st.auth)).json()
        assert prof["version"] == 2

        r = await st.api.post(
            "/v1/memory/forget", json={"text": "our brand's main colour is blue"}, headers=st.auth
        )
        assert r.status_code == 202, r.text
        card_id = r.json()["card_id"]
        card = (await st.api.get(f"/v1/cards/{card_id}", headers=st.auth)).json()
        assert card["kind"] == "forget" and card["status"] == "open"
        assert await _memories(st) != []  # nothing happens before the confirmation
        r = await st.api.post(
            f"/v1/cards/{card_id}/actions", json={"action": "confirm"}, headers=st.auth
        )
        assert r.status_code == 200, r.text

        async def forgotten() -> bool:
            prof = (await st.api.get("/v1/memory/profile", headers=st.auth)).json()
            return prof["version"] == 3 and await _memories(st) == []

        await eventually(forgotten)
        hist = (await st.api.get(f"/v1/memory/{m1['memory_id']}/history", headers=st.auth)).json()
        assert all(v["status"] == "deleted" and v["content"] == "" for v in hist["versions"])
        svc = get_services(st.settings)
        assert await svc.index.count(svc.collection, {"user_id": st.user_id}) == 0

        async with httpx.AsyncClient() as http:
            deps = ToolDeps(st.db, http, AssetStore(tmp_path / "a"), st.settings)
            ctx = await memory_for_context(deps, st.user_id, "tsk_later", "brand colours blue")
        seen = (ctx.profile_text + " ".join(ctx.items)).lower()
        assert ctx.degraded is None and "blue" not in seen and "cream" not in seen
        r = await st.api.post(
            f"/v1/memory/{m1['memory_id']}/correct", json={"content": "x"}, headers=st.auth
        )
        assert r.status_code == 409 and r.json()["error"] == "conflict"

        again = await _say(st, temporal_client, BLUE)  # the same words, a later message
        await eventually(lambda: _extracted(st, again))
        assert await _memories(st) == []
        async with st.db.session() as s:
            ev = await s.scalar(select(Evidence).where(Evidence.message_id == again))
            types = list(await s.scalars(select(Event.type).where(Event.user_id == st.user_id)))
        assert ev is not None and [c["reason"] for c in ev.candidates] == ["suppressed"]
        assert types.count("memory.changed") == 3  # v1, v2, the forget

        # A person's correction is a new stated version, through the same workflow.
        await _say(st, temporal_client, "Our brand's font is Futura.")
        [font] = await eventually(_memories_with(st, 1))
        r = await st.api.post(
            f"/v1/memory/{font['memory_id']}/correct",
            json={"content": "The brand's font is Futura Bold."},
            headers=st.auth,
        )
        assert r.status_code == 200, r.text
        assert [(v["relation"], v["status"]) for v in r.json()["versions"]] == [
            ("ORIGIN", "superseded"),
            ("CORRECT", "active"),
        ]
        # Another person sees none of it.
        other = await st.api.post(
            "/v1/admin/users",
            json={"name": "other"},
            headers={"Authorization": f"Bearer {st.settings.admin_token.get_secret_value()}"},
        )
        other_auth = {"Authorization": f"Bearer {other.json()['token']}"}
        assert (await st.api.get("/v1/memory", headers=other_auth)).json()["memories"] == []
        r = await st.api.get(f"/v1/memory/{font['memory_id']}/history", headers=other_auth)
        assert r.status_code == 404 and r.json()["error"] == "not_found"
        r = await st.api.post("/v1/memory/forget", json={}, headers=st.auth)
        assert r.status_code == 400
        # The person's MemoryWorkflow history replays against the current code.
        handle = temporal_client.get_workflow_handle(workflow_id(st.user_id))
        await Replayer(workflows=WORKFLOWS).replay_workflow(await handle.fetch_history())
    await close_services()


def _memories_with(st: Stack, version: int) -> Any:
    async def check() -> list[dict[str, Any]] | None:
        mems = await _memories(st)
        return mems if mems and mems[-1]["version"] == version else None

    return check


class FlakyExtractor:
    """Fails the first `failures` calls (the model provider is down), then answers."""

    name = "flaky"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.calls <= self.failures:
            raise ModelError("provider unavailable")
        return offline_extract(request)


async def test_failed_extraction_is_retried_later(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    flaky = FlakyExtractor(failures=3)
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        provider=flaky,
        embedder="fake",
    ) as st:
        mid = new_id("msg")
        async with st.db.session() as s:
            s.add(MessageRow(id=mid, user_id=st.user_id, text=BLUE))
        # Short limits: two attempts per round, the next round half a second later.
        await temporal_client.start_workflow(
            MemoryWorkflow.run,
            MemoryInput(st.user_id, retry_seconds=0.5, activity_attempts=2),
            id=workflow_id(st.user_id),
            task_queue=task_queue,
            start_signal="extract",
            start_signal_args=[mid],
        )
        await eventually(lambda: _extracted(st, mid), within=60)
        assert flaky.calls == 4
        assert [m["content"] for m in await _memories(st)] == ["The brand's main colour is blue."]
        handle = temporal_client.get_workflow_handle(workflow_id(st.user_id))
        history = await handle.fetch_history()
        assert len(history.events) < 200  # ids only in history
    await close_services()


async def test_duplicate_signals_store_once(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, embedder="fake"
    ) as st:
        mid = new_id("msg")
        async with st.db.session() as s:
            s.add(MessageRow(id=mid, user_id=st.user_id, text=BLUE))
        for _ in range(5):  # the api retried, the person double-clicked: five deliveries
            await request_extraction(temporal_client, st.settings, st.user_id, mid)
        await eventually(lambda: _extracted(st, mid))
        second = await _say(st, temporal_client, "Our brand's font is Futura.")
        await eventually(lambda: _extracted(st, second))  # runs after all five, in order
        async with st.db.session() as s:
            evidence = list(await s.scalars(select(Evidence).where(Evidence.message_id == mid)))
        assert len(evidence) == 1
        mems = await _memories(st)
        assert sorted((m["attribute"], m["version"]) for m in mems) == [
            ("font", 1),
            ("main_colour", 1),
        ]
        assert [s["relation"] for s in mems[0]["sources"]] == ["ORIGIN"]
        svc = get_services(st.settings)
        assert await svc.index.count(svc.collection, {"user_id": st.user_id}) == 2
    await close_services()

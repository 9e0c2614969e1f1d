"""API error contract over real HTTP: status, {"error", "detail"} body, nothing half-written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select
from temporalio.client import Client

from lomo.auth import create_user
from lomo.db.models import MessageRow
from lomo.signing import sign
from tests.stack import Stack, running_stack
from tests.test_slice import run_cat_slice


def assert_error(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert isinstance(body, dict) and {"error", "detail"} <= body.keys(), body
    assert isinstance(body["error"], str) and body["error"]
    assert isinstance(body["detail"], str) and body["detail"]
    if code is not None:
        assert body["error"] == code, body
    return body


async def event_count(stack: Stack, headers: dict[str, str] | None = None) -> int:
    r = await stack.api.get("/v1/events", params={"once": "true"}, headers=headers or stack.auth)
    assert r.status_code == 200
    return sum(1 for line in r.text.splitlines() if line.startswith("data: "))


async def message_count(stack: Stack, user_id: str | None = None) -> int:
    async with stack.db.session() as s:
        n = await s.scalar(
            select(func.count())
            .select_from(MessageRow)
            .where(MessageRow.user_id == (user_id or stack.user_id))
        )
    return int(n or 0)


async def test_refused_requests_leave_nothing_behind(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        events0, messages0 = await event_count(st), await message_count(st)
        api, auth = st.api, st.auth
        json_headers = {**auth, "Content-Type": "application/json"}

        # Bodies the API refuses.
        assert_error(
            await api.post("/v1/messages", content=b'{"text": "hi"', headers=json_headers),
            422,
            "validation_error",
        )
        assert_error(
            await api.post("/v1/messages", json={"client_message_id": "x"}, headers=auth),
            422,
            "validation_error",
        )
        too_long = "a" * (st.settings.max_message_chars + 1)
        assert_error(
            await api.post("/v1/messages", json={"text": too_long}, headers=auth),
            413,
            "too_large",
        )
        assert_error(
            await api.post("/v1/tasks/tsk_nope/messages", json={"text": "hi"}, headers=auth),
            404,
            "not_found",
        )
        assert_error(
            await api.post(
                "/v1/messages", json={"text": "hi", "task_id": "tsk_nope"}, headers=auth
            ),
            404,
            "not_found",
        )
        assert_error(await api.get("/v1/tasks/unknown", headers=auth), 404, "not_found")
        assert_error(await api.get("/v1/messages/unknown", headers=auth), 404, "not_found")
        assert_error(await api.get("/v1/objects/unknown", headers=auth), 404, "not_found")

        # Credentials.
        r = await api.post("/v1/messages", json={"text": "hi"})
        assert_error(r, 401, "unauthorized")
        assert r.headers.get("www-authenticate") == "Bearer"
        assert_error(
            await api.post(
                "/v1/messages", json={"text": "hi"}, headers={"Authorization": "Bearer nope"}
            ),
            401,
            "unauthorized",
        )
        assert_error(
            await api.get("/v1/tasks", headers={"Authorization": "Basic abc"}), 401, "unauthorized"
        )

        # Generation callbacks.
        body = json.dumps({"job_id": "job_x", "status": "completed"}).encode()
        assert_error(
            await api.post(
                "/v1/generation/callbacks", content=body, headers={"X-Lomo-Signature": "0" * 64}
            ),
            401,
            "unauthorized",
        )
        assert_error(await api.post("/v1/generation/callbacks", content=body), 401, "unauthorized")
        secret = st.settings.callback_secret.get_secret_value()
        for bad in (b"not json", b'{"status": "completed"}', b"[1, 2]"):
            assert_error(
                await api.post(
                    "/v1/generation/callbacks",
                    content=bad,
                    headers={"X-Lomo-Signature": sign(secret, bad)},
                ),
                400,
                "invalid_input",
            )
        assert_error(
            await api.post(
                "/v1/generation/callbacks",
                content=body,
                headers={"X-Lomo-Signature": sign(secret, body)},
            ),
            404,
            "not_found",
        )

        assert await message_count(st) == messages0
        assert await event_count(st) == events0

        # Optimistic concurrency on objects.
        r = await api.post(
            "/v1/objects", json={"type": "document", "name": "n", "content": {"a": 1}}, headers=auth
        )
        assert r.status_code == 201, r.text
        oid = r.json()["object_id"]
        r = await api.put(
            f"/v1/objects/{oid}", json={"base_version": 1, "content": {"a": 2}}, headers=auth
        )
        assert r.status_code == 200 and r.json()["version"] == 2, r.text
        events1 = await event_count(st)
        conflict = assert_error(
            await api.put(
                f"/v1/objects/{oid}", json={"base_version": 1, "content": {"a": 3}}, headers=auth
            ),
            409,
            "version_conflict",  # API.md's code for a stale base version
        )
        assert conflict["current_version"] == 2
        obj = (await api.get(f"/v1/objects/{oid}", headers=auth)).json()
        assert obj["version"] == 2 and obj["content"] == {"a": 2}
        assert await event_count(st) == events1
        assert_error(
            await api.put(
                f"/v1/objects/{oid}", json={"base_version": 0, "content": {}}, headers=auth
            ),
            422,
            "validation_error",
        )

        # The same client message twice is one message.
        payload = {"text": "Generate an image of a cat", "client_message_id": "cm-1"}
        first = await api.post("/v1/messages", json=payload, headers=auth)
        second = await api.post("/v1/messages", json=payload, headers=auth)
        assert first.status_code == second.status_code == 202, (first.text, second.text)
        assert first.json()["message_id"] == second.json()["message_id"]
        assert await message_count(st) == messages0 + 1
        async with st.db.session() as s:
            n = await s.scalar(
                select(func.count())
                .select_from(MessageRow)
                .where(MessageRow.client_message_id == "cm-1")
            )
        assert n == 1


async def test_auth_admin_and_isolation(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        api = st.api
        admin = {"Authorization": f"Bearer {st.settings.admin_token.get_secret_value()}"}

        # The admin endpoint.
        assert_error(
            await api.post("/v1/admin/users", json={"name": "x"}, headers=st.auth),
            401,
            "unauthorized",
        )
        assert_error(await api.post("/v1/admin/users", json={"name": "x"}), 401, "unauthorized")
        assert_error(
            await api.post("/v1/admin/users", json={"name": ""}, headers=admin),
            422,
            "validation_error",
        )
        r = await api.post("/v1/admin/users", json={"name": "carol"}, headers=admin)
        assert r.status_code == 201, r.text
        made = r.json()
        assert made["name"] == "carol" and made["user_id"] and made["token"]
        carol = {"Authorization": f"Bearer {made['token']}"}
        r = await api.get("/v1/tasks", headers=carol)
        assert r.status_code == 200 and r.json() == {"tasks": [], "next": None}
        # The admin token is not a user token.
        assert_error(await api.get("/v1/tasks", headers=admin), 401, "unauthorized")

        # Another user's ids answer 404, as if unknown.
        task = await run_cat_slice(st, "Generate an image of a red tabby cat")
        tid, art = task["task_id"], task["artifacts"][0]
        async with st.db.session() as s:
            mid = await s.scalar(select(MessageRow.id).where(MessageRow.user_id == st.user_id))
        async with st.db.session() as s:
            _, other_token = await create_user(s, "mallory")
        other = {"Authorization": f"Bearer {other_token}"}
        r = await api.post(
            "/v1/objects", json={"type": "document", "name": "d", "content": {}}, headers=st.auth
        )
        assert r.status_code == 201
        doc = r.json()["object_id"]
        events_before = await event_count(st)
        messages_before = await message_count(st)

        for r in (
            await api.get(f"/v1/tasks/{tid}", headers=other),
            await api.get(f"/v1/tasks/{tid}/context", headers=other),
            await api.post(f"/v1/tasks/{tid}/stop", headers=other),
            await api.post(f"/v1/tasks/{tid}/messages", json={"text": "hi"}, headers=other),
            await api.post("/v1/messages", json={"text": "hi", "task_id": tid}, headers=other),
            await api.get(f"/v1/messages/{mid}", headers=other),
            await api.get(f"/v1/objects/{art}", headers=other),
            await api.get(f"/v1/objects/{art}/blob", headers=other),
            await api.get(f"/v1/objects/{doc}", headers=other),
            await api.put(
                f"/v1/objects/{doc}", json={"base_version": 1, "content": {"x": 1}}, headers=other
            ),
        ):
            assert_error(r, 404, "not_found")

        # Nothing changed for either user.
        async with st.db.session() as s:
            other_id = await s.scalar(
                select(MessageRow.user_id).where(MessageRow.user_id != st.user_id)
            )
        assert other_id is None
        assert await event_count(st, other) == 0
        assert await message_count(st) == messages_before
        assert await event_count(st) == events_before
        obj = (await api.get(f"/v1/objects/{doc}", headers=st.auth)).json()
        assert obj["version"] == 1 and obj["content"] == {}
        assert (await api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()["status"] == "completed"
        listed = (await api.get("/v1/objects", headers=other)).json()
        assert listed == {"objects": [], "next": None}

"""Channels: a program holding one of the person's API tokens may work for them, but may
not change what the person allowed (budget settings, plan budgets, autonomy), confirm a
price, delete or forget card, or manage tokens. Those answer 403 and change nothing; the
person's app session does them. API tokens are listed, revoked and expire."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import update
from temporalio.client import Client

from cards.store import create_card
from lomo import clock
from lomo.db.models import ApiToken, Task
from lomo.ids import new_id
from tests.stack import Stack, running_stack
from tests.test_api_errors import assert_error


async def _api_token(st: Stack, **body: Any) -> tuple[str, dict[str, str]]:
    r = await st.api.post("/v1/tokens", json={"name": "script", **body}, headers=st.auth)
    assert r.status_code == 201, r.text
    return r.json()["token_id"], {"Authorization": f"Bearer {r.json()['token']}"}


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


async def _task(st: Stack) -> str:
    task_id = new_id("tsk")
    async with st.db.session() as s:
        s.add(Task(id=task_id, user_id=st.user_id, kind="persistent", status="running", goal="g"))
    return task_id


async def _card(st: Stack, kind: str, task_id: str) -> str:
    options = [{"id": "confirm", "label": "Yes"}, {"id": "reject", "label": "No"}]
    async with st.db.session() as s:
        card = await create_card(
            s, user_id=st.user_id, kind=kind, title=kind, options=options, task_id=task_id
        )
    return card.id


async def test_api_token_cannot_change_what_the_person_allowed(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        _, api = await _api_token(st)
        tid = await _task(st)
        before = (await st.api.get(f"/v1/tasks/{tid}/budget", headers=st.auth)).json()
        settings = {"free_confirm_amount": 500, "daily_free_limit": 5000}
        writes = [
            ("PUT", "/v1/budget/settings", settings),
            ("POST", f"/v1/tasks/{tid}/budget", {"amount_cents": 10_000}),
            ("POST", f"/v1/tasks/{tid}/autonomy", {"level": "ask"}),
            ("POST", "/v1/tokens", {"name": "more"}),
        ]
        for method, path, body in writes:
            r = await st.api.request(method, path, json=body, headers=api)
            assert_error(r, 403, "forbidden")
        assert_error(await st.api.get("/v1/tokens", headers=api), 403, "forbidden")
        # Reading stays open to the program, and nothing it tried changed anything.
        assert (await st.api.get("/v1/budget", headers=api)).status_code == 200
        assert (await st.api.get(f"/v1/tasks/{tid}/budget", headers=api)).json() == before

        # The person's app may do each of them.
        for method, path, body in writes:
            r = await st.api.request(method, path, json=body, headers=st.auth)
            assert r.status_code in (200, 201), (path, r.text)
        after = (await st.api.get(f"/v1/tasks/{tid}/budget", headers=st.auth)).json()
        assert after["autonomy"] == "ask" and after != before


async def test_api_token_confirms_only_what_is_not_money_or_loss(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        _, api = await _api_token(st)
        tid = await _task(st)
        for kind in ("price", "delete", "forget"):
            card = await _card(st, kind, tid)
            for answer in ({"action": "confirm"}, {"action": "select", "option_id": "confirm"}):
                r = await st.api.post(f"/v1/cards/{card}/actions", json=answer, headers=api)
                assert_error(r, 403, "forbidden")
            view = (await st.api.get(f"/v1/cards/{card}", headers=st.auth)).json()
            assert view["status"] == "open", view  # the refused answer was rolled back

        # A refusal is always allowed: it spends and destroys nothing.
        price = await _card(st, "price", tid)
        r = await st.api.post(f"/v1/cards/{price}/actions", json={"action": "reject"}, headers=api)
        assert r.status_code == 200, r.text
        # An ordinary decision is the program's to make.
        decision = await _card(st, "confirm", tid)
        r = await st.api.post(
            f"/v1/cards/{decision}/actions", json={"action": "confirm"}, headers=api
        )
        assert r.status_code == 200, r.text


async def test_api_tokens_are_listed_revoked_and_expire(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        first, api1 = await _api_token(st, expires_in_days=30)
        second, api2 = await _api_token(st)
        assert (await st.api.get("/v1/session", headers=api1)).json()["channel"] == "api"

        listed = (await st.api.get("/v1/tokens", headers=st.auth)).json()["tokens"]
        assert [t["token_id"] for t in listed] == [first, second]
        assert all(t["active"] and "token" not in t for t in listed)
        life = [_at(t["expires_at"]) - _at(t["created_at"]) for t in listed]
        assert life == [timedelta(days=30), timedelta(days=90)]

        r = await st.api.delete(f"/v1/tokens/{first}", headers=st.auth)
        assert r.status_code == 200 and r.json()["active"] is False
        assert_error(await st.api.get("/v1/session", headers=api1), 401, "unauthorized")
        again = await st.api.delete(f"/v1/tokens/{first}", headers=st.auth)
        assert again.json()["revoked_at"] == r.json()["revoked_at"]

        async with st.db.session() as s:
            past = clock.now() - timedelta(seconds=1)
            await s.execute(update(ApiToken).where(ApiToken.id == second).values(expires_at=past))
        assert_error(await st.api.get("/v1/session", headers=api2), 401, "unauthorized")
        listed = (await st.api.get("/v1/tokens", headers=st.auth)).json()["tokens"]
        assert [t["active"] for t in listed] == [False, False]

        for bad in ({"expires_in_days": 0}, {"expires_in_days": 366}):
            r = await st.api.post("/v1/tokens", json=bad, headers=st.auth)
            assert_error(r, 422, "validation_error")
        assert_error(await st.api.delete("/v1/tokens/tok_nope", headers=st.auth), 404)

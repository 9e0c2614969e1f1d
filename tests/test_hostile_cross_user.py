"""Cross-user isolation, generated from the route table: person B calls every route that
takes an id with person A's real ids (tasks, messages, cards, objects of each type with
their blobs, memories, flow runs) and gets exactly what a nonexistent id gets: 404
`not_found` with the same detail. Ids in query strings and bodies (a task filter, a
message's task/card/object/attachments, a memory to forget) answer the same as unknown
ids too, and B's event stream never shows A's events. Nothing of A's changes.

The route table is app.routes, not a hand list: a new route with an id parameter this test
cannot fill fails it until ID_KINDS names where its ids come from."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from sqlalchemy import func, select
from temporalio.client import Client

from api.app import create_app
from lomo.auth import create_user
from lomo.db.models import MessageRow
from lomo.settings import Settings
from lomo.states import ACTIVE_FLOW_RUN
from tests.helpers import eventually
from tests.stack import Stack, running_stack
from tests.test_slice import run_cat_slice

# Every id parameter name the api uses -> the key of A's ids that fills it.
ID_KINDS = {
    "task_id": "task",
    "message_id": "message",
    "card_id": "card",
    "object_id": "object",
    "memory_id": "memory",
    "run_id": "run",
    "token_id": "token",
    "payment_id": "payment",
}
LIST_IDS = {"attachments": "object"}  # body lists of ids


def _resolve(schema: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = spec["components"]["schemas"][name]
    return schema


def minimal(schema: dict[str, Any], spec: dict[str, Any]) -> Any:
    """The smallest valid instance of a request schema (so validation never answers first)."""
    schema = _resolve(schema, spec)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if _resolve(o, spec).get("type") != "null"]
            return minimal(options[0], spec)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: minimal(props[k], spec) for k in schema.get("required", [])}
    if kind == "string":
        formats = {"time": "00:00:00", "date": "2026-01-01", "date-time": "2026-01-01T00:00:00Z"}
        return formats.get(schema.get("format", ""), "x" * max(1, schema.get("minLength", 1)))
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0) + 1)
        return max(1, low)
    if kind == "boolean":
        return False
    if kind == "array":
        return [minimal(schema["items"], spec)] * schema.get("minItems", 0)
    return {}


def _body_schema(spec: dict[str, Any], path: str, method: str) -> dict[str, Any] | None:
    op = spec["paths"][path][method.lower()]
    content = op.get("requestBody", {}).get("content", {}).get("application/json")
    return _resolve(content["schema"], spec) if content else None


def _fake(real: str) -> str:
    """An id of the same shape that names nothing."""
    prefix, _, rest = real.partition("_")
    return f"{prefix}_{'z' * len(rest)}" if rest else "z" * len(real)


def _same(a: httpx.Response, b: httpx.Response, ids: tuple[str, str]) -> None:
    """The two answers are the same once each names its own id as <id>."""
    assert a.status_code == b.status_code, (a.status_code, a.text, b.status_code, b.text)
    assert a.headers.get("content-type") == b.headers.get("content-type")
    texts = [r.text.replace(i, "<id>") for r, i in zip((a, b), ids, strict=True)]
    assert texts[0] == texts[1], texts


async def _ids_of_a(st: Stack) -> dict[str, list[str]]:
    """Person A (the stack's user) with one of everything, made through the real paths."""
    api, auth = st.api, st.auth
    r = await api.post(
        "/v1/messages", json={"text": "Our brand's main colour is blue."}, headers=auth
    )
    assert r.status_code == 202, r.text

    async def memory() -> Any:
        ms = (await api.get("/v1/memory", headers=auth)).json()["memories"]
        return [m["memory_id"] for m in ms if "blue" in m["content"].lower()]

    memories = await eventually(memory, within=90)
    task = await run_cat_slice(st, "Generate an image of a red tabby cat")
    asset = task["artifacts"][0]
    objects = {}
    r = await api.post(
        "/v1/objects",
        json={"type": "document", "name": "d", "content": {"text": "one two"}},
        headers=auth,
    )
    assert r.status_code == 201, r.text
    objects["document"] = r.json()["object_id"]
    node = {"type": "document", "params": {"object_id": objects["document"]}, "inputs": []}
    r = await api.post(
        "/v1/objects",
        json={"type": "flow", "name": "f", "content": {"nodes": {"d": node}}},
        headers=auth,
    )
    assert r.status_code == 201, r.text
    objects["flow"] = r.json()["object_id"]
    r = await api.post(f"/v1/objects/{objects['flow']}/runs", json={}, headers=auth)
    assert r.status_code == 202, r.text
    run = r.json()["run_id"]

    async def run_ended() -> Any:  # nothing of A may still move while B probes
        v = (await api.get(f"/v1/flow-runs/{run}", headers=auth)).json()
        return v["status"] not in ACTIVE_FLOW_RUN

    await eventually(run_ended, within=60)
    r = await api.delete(f"/v1/objects/{objects['document']}", headers=auth)
    assert r.status_code == 202, r.text
    card = r.json()["card_id"]

    async def settled() -> bool:  # every message handled, no task still working
        async with st.db.session() as s:
            pending = await s.scalar(
                select(func.count())
                .select_from(MessageRow)
                .where(MessageRow.user_id == st.user_id, MessageRow.routing_status != "routed")
            )
        tasks = (await api.get("/v1/tasks?include_lightweight=true", headers=auth)).json()
        busy = [t for t in tasks["tasks"] if t["status"] in ("running", "waiting_generation")]
        return pending == 0 and not busy

    await eventually(settled, within=60)
    async with st.db.session() as s:
        messages = list(
            await s.scalars(select(MessageRow.id).where(MessageRow.user_id == st.user_id))
        )
    token = (await api.post("/v1/tokens", json={"name": "a's script"}, headers=auth)).json()
    r = await api.post("/v1/budget/top-ups", json={"amount_cents": 500}, headers=auth)
    assert r.status_code in (200, 201, 202), r.text
    payment = r.json()["payment_id"]

    async def paid() -> bool:  # the deposit lands before B probes, not during
        got = await api.get(f"/v1/budget/top-ups/{payment}", headers=auth)
        return bool(got.json()["status"] == "succeeded")

    await eventually(paid, within=60)
    return {
        "token": [token["token_id"]],
        "payment": [payment],
        "task": [task["task_id"]],
        "message": messages,
        "card": [card],
        "object": [objects["document"], objects["flow"], asset],
        "memory": memories[:1],
        "run": [run],
    }


async def _snapshot(st: Stack, ids: dict[str, list[str]]) -> dict[str, Any]:
    """What A can see of A's things (with events): must not move while B probes."""
    api, auth = st.api, st.auth
    events = await api.get("/v1/events", params={"once": "true"}, headers=auth)
    snap: dict[str, Any] = {
        "events": sum(1 for x in events.text.splitlines() if x.startswith("data: "))
    }
    snap["task"] = (await api.get(f"/v1/tasks/{ids['task'][0]}", headers=auth)).json()
    snap["cards"] = (await api.get("/v1/cards", headers=auth)).json()
    snap["objects"] = [
        (await api.get(f"/v1/objects/{o}", headers=auth)).json() for o in ids["object"]
    ]
    snap["memory"] = (await api.get("/v1/memory", headers=auth)).json()
    snap["run"] = (await api.get(f"/v1/flow-runs/{ids['run'][0]}", headers=auth)).json()["status"]
    snap["tokens"] = (await api.get("/v1/tokens", headers=auth)).json()
    return snap


def _routes(app: FastAPI) -> list[tuple[str, str, APIRoute]]:
    """(full path, method, route) for every API route, through included routers."""
    out = []
    for ctx in iter_route_contexts(app.routes):
        route = ctx.original_route
        if isinstance(route, APIRoute) and ctx.path:
            for method in sorted((route.methods or set()) - {"HEAD"}):
                out.append((ctx.path, method, route))
    return out


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_another_persons_ids_answer_like_unknown_ones(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, embedder="fake"
    ) as st:
        ids = await _ids_of_a(st)
        async with st.db.session() as s:
            _, token_b = await create_user(s, "mallory")
        b = {"Authorization": f"Bearer {token_b}"}
        app = create_app(st.settings)
        spec = app.openapi()
        before = await _snapshot(st, ids)

        probed: set[tuple[str, str]] = set()
        routes = _routes(app)
        assert len(routes) > 30, routes  # the whole api, not a fraction
        for path, method, route in routes:
            params = [p.name for p in route.dependant.path_params]
            unknown = [p for p in params if p not in ID_KINDS]
            assert not unknown, f"{method} {path}: no real id for {unknown}; add to ID_KINDS"
            schema = _body_schema(spec, path, method) if method != "GET" else None
            body = minimal(schema, spec) if schema else None
            if params:
                for values in _fillings(params, ids):
                    real = path.format(**values)
                    fake_values = {k: _fake(v) for k, v in values.items()}
                    fake = path.format(**fake_values)
                    query = {"once": "true"} if path == "/v1/events" else None
                    r_real = await st.api.request(method, real, json=body, params=query, headers=b)
                    r_fake = await st.api.request(method, fake, json=body, params=query, headers=b)
                    assert r_real.status_code == 404, (method, real, r_real.text)
                    assert r_real.json()["error"] == "not_found", r_real.text
                    for k in values:  # one id per route in practice
                        _same(r_real, r_fake, (values[k], fake_values[k]))
                probed.add((method, path))
            # Ids in the query string or the body of id-less routes.
            for where, name, kind in _id_fields(route, method, schema, spec):
                for real_id in ids[kind]:
                    fake_id = _fake(real_id)
                    results = []
                    for value in (real_id, fake_id):
                        v: Any = [value] if name in LIST_IDS else value
                        if where == "query":
                            r = await st.api.request(method, path, params={name: v}, headers=b)
                        else:
                            r = await st.api.request(
                                method, path, json={**(body or {}), name: v}, headers=b
                            )
                        results.append(r)
                    assert results[0].status_code in (200, 404), (path, name, results[0].text)
                    _same(results[0], results[1], (real_id, fake_id))
                    probed.add((method, f"{path}:{name}"))

        # The generated probes reach every kind of thing, the stream and the blob.
        for must in (
            ("GET", "/v1/objects/{object_id}/blob"),
            ("GET", "/v1/tasks/{task_id}/context"),
            ("POST", "/v1/cards/{card_id}/actions"),
            ("POST", "/v1/memory/{memory_id}/correct"),
            ("GET", "/v1/memory/{memory_id}/history"),
            ("GET", "/v1/flow-runs/{run_id}"),
            ("POST", "/v1/messages:task_id"),
            ("POST", "/v1/messages:attachments"),
            ("GET", "/v1/cards:task_id"),
            ("POST", "/v1/memory/forget:memory_id"),
            ("DELETE", "/v1/tokens/{token_id}"),
        ):
            assert must in probed, must

        # B's event stream, from the start and from A's last event id, shows nothing of A.
        for headers in (b, {**b, "Last-Event-ID": "0"}, {**b, "Last-Event-ID": "1"}):
            r = await st.api.get("/v1/events", params={"once": "true"}, headers=headers)
            assert r.status_code == 200 and "data:" not in r.text, r.text
        async with st.db.session() as s:
            n = await s.scalar(
                select(func.count()).select_from(MessageRow).where(MessageRow.user_id != st.user_id)
            )
        assert n == 0  # B stored nothing
        assert await _snapshot(st, ids) == before  # A's things did not move


def _fillings(params: list[str], ids: dict[str, list[str]]) -> list[dict[str, str]]:
    """One call per real id of the route's (single) id parameter."""
    assert len(params) == 1, params  # two-id routes would need pairs
    name = params[0]
    return [{name: v} for v in ids[ID_KINDS[name]]]


def _id_fields(
    route: APIRoute, method: str, schema: dict[str, Any] | None, spec: dict[str, Any]
) -> list[tuple[str, str, str]]:
    """(query|body, name, kind) for id fields of a route without path parameters."""
    if route.dependant.path_params:
        return []
    found = [
        ("query", p.name, ID_KINDS[p.name])
        for p in route.dependant.query_params
        if p.name in ID_KINDS
    ]
    for name in (schema or {}).get("properties", {}):
        if name in ID_KINDS:
            found.append(("body", name, ID_KINDS[name]))
        elif name in LIST_IDS:
            found.append(("body", name, LIST_IDS[name]))
    return found


def test_minimal_bodies_are_valid_for_every_route() -> None:
    """The generator the probe relies on: each route's minimal body passes validation
    (else the probe would see 422 instead of reaching the ownership check)."""
    app = create_app(Settings(model_provider="offline"))
    spec = app.openapi()
    assert re.match(r"^3\.", spec["openapi"])
    checked = 0
    for path, method, route in _routes(app):
        schema = _body_schema(spec, path, method) if method != "GET" else None
        if schema is None:
            continue
        body = minimal(schema, spec)
        assert route.body_field is not None
        _, errors = route.body_field.validate(body, {}, loc=("body",))
        assert not errors, (path, body, errors)
        checked += 1
    assert checked > 10

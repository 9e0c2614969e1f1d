"""Property-based fuzzing of the whole HTTP API from its own OpenAPI schema (schemathesis):
valid and invalid requests for every operation, against a real uvicorn server on a real
database with a real Temporal dev server. Every answer is below 500, and every 4xx carries
the documented `{"error", "detail"}` body. Ids of real objects and cards are fed in too, so
bodies reach the domain code behind the 404s.

Bounded by EXAMPLES per operation and mode and derandomized, so a run is the same every
time and stays within a CI budget."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from requests.structures import CaseInsensitiveDict
from schemathesis import GenerationMode

from api.app import create_app
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.settings import Settings
from lomo.signing import SIGNATURE_HEADER, sign
from tests.helpers import ThreadServer

EXAMPLES = 12  # per operation and generation mode
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)


class Api:
    def __init__(self, url: str, token: str, ids: dict[str, list[str]], settings: Settings) -> None:
        self.url, self.token, self.ids, self.settings = url, token, ids, settings
        self.session = requests.Session()
        self.calls = 0


@pytest.fixture
async def api(tmp_path: Path, db_url: str, temporal_server: str, task_queue: str) -> Any:
    s = Settings(
        data_dir=tmp_path,
        database_url=db_url,
        temporal_address=temporal_server,
        task_queue=task_queue,  # no worker: started workflows simply wait
        model_provider="offline",
        max_upload_bytes=4096,
        rate_limit_per_minute=0,  # the fuzzer is one token making thousands of requests
    )
    db = Database(db_url)
    async with db.session() as sess:
        _, token = await create_user(sess, "fuzzed")
    with ThreadServer(create_app(s)) as srv:
        ids = await _real_ids(srv.url, token)
        yield Api(srv.url, token, ids, s)
    await db.dispose()


async def _real_ids(url: str, token: str) -> dict[str, list[str]]:
    """A document, a flow, an asset and a delete card of the fuzzed person."""
    auth = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=auth) as c:
        objects = []
        for body in (
            {"type": "document", "name": "d", "content": {"text": "one two three"}},
            {"type": "flow", "name": "f", "content": {"nodes": {"a": {"type": "step"}}}},
            {
                "type": "asset",
                "name": "a",
                "content": {"media_type": "image/png", "data_base64": "iVBORw0K"},
            },
        ):
            r = await c.post("/v1/objects", json=body)
            assert r.status_code == 201, r.text
            objects.append(r.json()["object_id"])
        r = await c.delete(f"/v1/objects/{objects[0]}")
        assert r.status_code == 202, r.text
        return {"object_id": objects, "card_id": [r.json()["card_id"]]}


def _check(case: schemathesis.Case, status: int, content: bytes) -> None:
    shown = content[:500].decode("utf-8", "replace")
    what = f"{case.method} {case.formatted_path} -> {status}: {shown}"
    assert status < 500, f"server error\n{what}\n{case.as_curl_command()}"
    if 400 <= status < 500:
        body = json.loads(content)
        assert isinstance(body, dict), what
        assert isinstance(body.get("error"), str) and body["error"], what
        assert isinstance(body.get("detail"), str) and body["detail"], what


def _run(api: Api, op: Any, mode: GenerationMode, path_parameters: dict[str, Any]) -> None:
    """Fuzz one operation; an operation without anything to make invalid (no parameters,
    no body) has no negative cases."""
    # The event stream stays open by design; `once` makes each fuzzed call return.
    query = {"once": "true"} if op.path == "/v1/events" else None
    strategy = op.as_strategy(
        generation_mode=mode, path_parameters=path_parameters or None, query=query
    )

    @FUZZ
    @given(case=strategy)
    def fuzz(case: schemathesis.Case) -> None:
        case.headers = CaseInsensitiveDict(dict(case.headers or {}))
        # The admin route is fuzzed with the admin token, every other with the person's.
        admin = op.path.startswith("/v1/admin/")
        token = api.settings.admin_token.get_secret_value() if admin else api.token
        case.headers["Authorization"] = f"Bearer {token}"
        response = case.call(base_url=api.url, session=api.session, timeout=30)
        _check(case, response.status_code, response.content)
        api.calls += 1

    try:
        fuzz()
    except Unsatisfiable:
        if mode is not GenerationMode.NEGATIVE:
            raise


def _operations(url: str) -> Iterator[Any]:
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    for result in schema.get_all_operations():
        yield result.ok()  # type: ignore[union-attr]  # an invalid schema fails the test


# Invalid requests mostly end in validation before any database work, so they run on
# Postgres only (the stricter store, to bound the time); valid ones run on both.
@pytest.mark.parametrize(
    ("db_url", "mode"),
    [
        ("sqlite", GenerationMode.POSITIVE),
        ("postgres", GenerationMode.POSITIVE),
        ("postgres", GenerationMode.NEGATIVE),
    ],
    indirect=["db_url"],
)
async def test_fuzzed_requests_never_cause_a_server_error(api: Api, mode: GenerationMode) -> None:
    operations = list(_operations(api.url))
    assert len(operations) > 30  # the schema is the whole api
    for op in operations:
        _run(api, op, mode, {})
        # The same operation again on the person's real ids (bodies reach the domain).
        names = [p.name for p in op.path_parameters]
        for name in names:
            for real in api.ids.get(name, []):
                _run(api, op, mode, {name: real})
    assert api.calls > len(operations) * EXAMPLES // 2, api.calls  # really fuzzed


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
REPORT_KEYS = ("job_id", "status", "progress", "seq", "idempotency_key", "result_url", "error")


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_signed_callbacks_with_any_json_never_cause_a_server_error(api: Api) -> None:
    """The callback route has no schema to fuzz from: correctly signed reports with any
    JSON in any field (the upstream is trusted to sign, not to send sane values)."""
    secret = api.settings.callback_secret.get_secret_value()
    reports = st.dictionaries(st.sampled_from(REPORT_KEYS), JSON) | JSON

    @settings(FUZZ, max_examples=60)
    @given(report=reports)
    def fuzz(report: Any) -> None:
        body = json.dumps(report).encode()
        headers = {SIGNATURE_HEADER: sign(secret, body), "Content-Type": "application/json"}
        r = api.session.post(f"{api.url}/v1/generation/callbacks", data=body, headers=headers)
        assert r.status_code in (400, 404), (report, r.status_code, r.text)  # no such job
        _check(_Case(), r.status_code, r.content)  # type: ignore[arg-type]

    fuzz()


class _Case:
    method, formatted_path = "GET", "/x"

    def as_curl_command(self) -> str:
        return "curl"


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, {"error": "x", "detail": "y"}),
        (404, {"detail": "y"}),
        (400, {"error": "", "detail": "y"}),
    ],
)
def test_the_check_refuses_server_errors_and_bare_4xx(status: int, body: object) -> None:
    """The property is not vacuous: a 5xx, or a 4xx without the error body, fails it."""
    with pytest.raises(AssertionError):
        _check(_Case(), status, json.dumps(body).encode())  # type: ignore[arg-type]
    _check(_Case(), 404, b'{"error": "not_found", "detail": "no such thing"}')  # type: ignore[arg-type]

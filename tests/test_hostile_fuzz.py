"""Property-based fuzzing of the whole HTTP API from its own OpenAPI schema (schemathesis):
valid and invalid requests for every operation, against a real uvicorn server on a real
database with a real Temporal dev server, with schemathesis' own checks: no server error,
every status and content type documented, every body matching its documented schema (the
errors: problem details, lomo/problem.py). Ids of real objects and cards are fed in too,
so bodies reach the domain code behind the 404s, and a stateful phase follows the
document's links (a message sent, read, moved and withdrawn; an object made, read,
replaced, deleted). The rate limit is off for the run (`rate_limit_per_minute=0`): the
fuzzer is one token making thousands of requests, and a 429 reaches no operation.

Bounded by EXAMPLES per operation and mode and derandomized, so a run is the same every
time and stays within a CI budget."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
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
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

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
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
]
# Signed by the upstream, never by a person's token: reached by the signed fuzz below.
SIGNED = {"POST /v1/generation/callbacks", "POST /v1/payments/webhooks"}


class Api:
    def __init__(self, url: str, token: str, ids: dict[str, list[str]], settings: Settings) -> None:
        self.url, self.token, self.ids, self.settings = url, token, ids, settings
        self.session = requests.Session()
        self.calls = 0
        # operation -> statuses it answered: which operations the fuzz really reached.
        self.answered: dict[str, Counter[int]] = defaultdict(Counter)

    def headers_for(self, path: str) -> dict[str, str]:
        # The admin route is fuzzed with the admin token, every other with the person's.
        admin = path.startswith("/v1/admin/")
        token = self.settings.admin_token.get_secret_value() if admin else self.token
        return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def api(tmp_path: Path, db_url: str, temporal_server: str, task_queue: str) -> Any:
    s = Settings(
        data_dir=tmp_path,
        database_url=db_url,
        temporal_address=temporal_server,
        task_queue=task_queue,  # no worker: started workflows simply wait
        model_provider="offline",
        max_upload_bytes=4096,
        rate_limit_per_minute=0,
        handoff_wait_seconds=0.2,  # no worker takes a hand-off: do not wait long for one
    )
    db = Database(db_url)
    async with db.session() as sess:
        _, token = await create_user(sess, "fuzzed")
    with ThreadServer(create_app(s)) as srv:
        ids = await _real_ids(srv.url, token)
        yield Api(srv.url, token, ids, s)
    await db.dispose()


async def _real_ids(url: str, token: str) -> dict[str, list[str]]:
    """A document, a flow, an asset, a delete card and a message of the fuzzed person."""
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
        card = r.json()["card_id"]
        r = await c.post("/v1/messages", json={"text": "a message to fuzz"})
        assert r.status_code == 202, r.text
        return {"object_id": objects, "card_id": [card], "message_id": [r.json()["message_id"]]}


def _check(case: schemathesis.Case, response: Any) -> None:
    """schemathesis' checks, with the request to repeat it when one fails."""
    try:
        case.validate_response(response, checks=CHECKS)
    except Exception as e:
        raise AssertionError(f"{case.as_curl_command()}\n{e}") from e


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
        case.headers.update(api.headers_for(op.path))
        response = case.call(base_url=api.url, session=api.session, timeout=30)
        api.answered[f"{op.method.upper()} {op.path}"][response.status_code] += 1
        _check(case, response)
        api.calls += 1

    try:
        fuzz()
    except Unsatisfiable:
        if mode is not GenerationMode.NEGATIVE:
            raise


def _schema(url: str) -> Any:
    return schemathesis.openapi.from_url(f"{url}/openapi.json")


def _operations(url: str) -> Iterator[Any]:
    for result in _schema(url).get_all_operations():
        yield result.ok()  # type: ignore[union-attr]  # an invalid schema fails the test


def unreached(api: Api, labels: list[str]) -> list[str]:
    """Operations the fuzz never got past the token and the rate limit with: no answer
    but 401 or 429 (the signed routes are fuzzed with signatures below)."""
    return [
        label
        for label in labels
        if label not in SIGNED and not set(api.answered[label]) - {401, 429}
    ]


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
async def test_fuzzed_requests_keep_the_documented_contract(api: Api, mode: GenerationMode) -> None:
    operations = list(_operations(api.url))
    assert len(operations) > 50  # the schema is the whole api
    for op in operations:
        _run(api, op, mode, {})
        # The same operation again on the person's real ids (bodies reach the domain).
        names = [p.name for p in op.path_parameters]
        for name in names:
            for real in api.ids.get(name, []):
                _run(api, op, mode, {name: real})
    labels = [f"{op.method.upper()} {op.path}" for op in operations]
    assert api.calls > len(operations) * EXAMPLES // 2, api.calls  # really fuzzed
    if mode is GenerationMode.POSITIVE:  # an operation without parameters has no invalid case
        assert not unreached(api, labels), dict(api.answered)
    summary = {label: dict(api.answered[label]) for label in labels}
    print(f"\nschemathesis {mode.value}: {api.calls} cases, {len(labels)} operations", summary)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_stateful_phase_follows_the_links(api: Api) -> None:
    """Over the document's links: a message sent is read, moved and withdrawn, an object
    made is read, replaced and deleted, each answer checked like every other."""
    machine = _schema(api.url).as_state_machine()
    chained: Counter[str] = Counter()

    class Links(machine):  # type: ignore[misc, valid-type]
        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {
                "base_url": api.url,
                "session": api.session,
                "headers": api.headers_for(case.path),
                "timeout": 30,
            }

        def after_call(self, response: Any, case: schemathesis.Case) -> None:
            chained[f"{case.method.upper()} {case.path} {response.status_code}"] += 1

        def validate_response(self, response: Any, case: schemathesis.Case, **_: Any) -> None:
            _check(case, response)

    # Not derandomized: the machine's choices depend on what the server answered.
    Links.run(
        settings=settings(
            max_examples=60,
            stateful_step_count=6,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    # The links were followed: an id from one answer was acted on by the next request.
    by_id = [k for k, n in chained.items() if "{" in k and k.rsplit(" ", 1)[1].startswith("2")]
    assert by_id, json.dumps(chained)
    print("\nstateful:", json.dumps(chained))


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
        assert r.headers["content-type"] == "application/problem+json", r.headers
        problem = r.json()
        assert problem["status"] == r.status_code and isinstance(problem["detail"], str), problem

    fuzz()

"""The OpenAPI document lists every status an operation can answer, each error with the
problem body it carries (lomo/problem.py), and links where the routes chain.

Most statuses follow from where an operation sits: the edge refuses any request with 400
(a Host not served, a NUL character), 413 (a body over its limit) and 429 (a rate); under
/v1 a missing or bad token is 401 and the schema's refusal is 422; a path id that names
nothing of the person's is 404. The rest are the domain's, listed here per operation."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field

from lomo.problem import PROBLEM_JSON


class Problem(BaseModel):
    """RFC 9457 problem details with Lomo's code; a refusal may add members (limits,
    versions, retry hints)."""

    model_config = ConfigDict(extra="allow")
    type: str = Field(description="always `about:blank`: `title` is the status's phrase")
    title: str
    status: int
    detail: str = Field(description="what happened, in a sentence")
    error: str = Field(description="the stable code (docs/api.md, Errors)")


class FieldError(BaseModel):
    loc: list[str | int] = Field(description="where: body, query, path or header, then names")
    msg: str
    type: str


class ValidationProblem(Problem):
    errors: list[FieldError] = Field(description="each refused field of the request")


# Answers only the person's app may give (docs/api.md, Channels).
APP_ONLY = {
    ("put", "/v1/budget/settings"),
    ("post", "/v1/tasks/{task_id}/budget"),
    ("post", "/v1/tasks/{task_id}/autonomy"),
    ("post", "/v1/cards/{card_id}/actions"),
    ("post", "/v1/tokens"),
    ("get", "/v1/tokens"),
    ("delete", "/v1/tokens/{token_id}"),
    ("post", "/v1/budget/top-ups"),
    ("get", "/v1/budget/top-ups/{payment_id}"),
    ("post", "/v1/ag-ui"),
}
# 404 without a path id: an id in the body, a report naming no job or payment, a setting
# never set.
UNKNOWN_IN_BODY = {
    ("get", "/v1/me/quiet-hours"),
    ("delete", "/v1/me/quiet-hours"),
    ("post", "/v1/messages"),
    ("post", "/v1/memory/forget"),
    ("post", "/v1/generation/callbacks"),
    ("post", "/v1/payments/webhooks"),
    ("post", "/v1/ag-ui"),
}
# 409: a write on an old or closed state (a closed task, an answered card, a version).
CONFLICTS = {
    ("post", "/v1/messages"),
    ("delete", "/v1/messages/{message_id}"),
    ("post", "/v1/messages/{message_id}/move"),
    ("post", "/v1/tasks/{task_id}/messages"),
    ("post", "/v1/tasks/{task_id}/stop"),
    ("post", "/v1/tasks/{task_id}/pause"),
    ("post", "/v1/tasks/{task_id}/resume"),
    ("post", "/v1/tasks/{task_id}/archive"),
    ("post", "/v1/tasks/{task_id}/promote"),
    ("post", "/v1/tasks/{task_id}/budget"),
    ("post", "/v1/tasks/{task_id}/autonomy"),
    ("post", "/v1/cards/{card_id}/actions"),
    ("put", "/v1/objects/{object_id}"),
    ("patch", "/v1/objects/{object_id}"),
    ("delete", "/v1/objects/{object_id}"),
    ("post", "/v1/objects/{object_id}/runs"),
    ("post", "/v1/flow-runs/{run_id}/resume"),
    ("post", "/v1/memory/{memory_id}/correct"),
    ("post", "/v1/memory/forget"),
    ("post", "/v1/ag-ui"),
    ("put", "/v1/tasks/{task_id}/nudges"),
}
UPLOADS = {("post", "/v1/objects"), ("put", "/v1/objects/{object_id}")}
# Under /v1 without a bearer token: the sign-in page's check of a pasted token.
TOKENLESS = {("post", "/v1/session/check")}


def statuses(method: str, path: str) -> list[int]:
    """Every error status the operation can answer."""
    op = (method, path)
    out = {400, 413, 429}
    if path.startswith("/v1/"):
        out |= {422} | (set() if op in TOKENLESS else {401})
        if "{" in path or op in UNKNOWN_IN_BODY:
            out.add(404)
        out |= {403} if op in APP_ONLY else set()
        out |= {409} if op in CONFLICTS else set()
        out |= {415} if op in UPLOADS else set()
    return sorted(out)


def _answer(status: int) -> dict[str, Any]:
    model = "ValidationProblem" if status == 422 else "Problem"
    return {
        "description": HTTPStatus(status).phrase,
        "content": {PROBLEM_JSON: {"schema": {"$ref": f"#/components/schemas/{model}"}}},
    }


def _components(schema: dict[str, Any]) -> None:
    defs = schema.setdefault("components", {}).setdefault("schemas", {})
    for model in (Problem, ValidationProblem):
        js = model.model_json_schema(ref_template="#/components/schemas/{model}")
        defs.update(js.pop("$defs", {}))
        defs[model.__name__] = js
    # FastAPI's own validation body: no answer carries it.
    for name in ("HTTPValidationError", "ValidationError"):
        defs.pop(name, None)


# Where one answer names what the next request acts on: a message just sent is read,
# moved and withdrawn; an object just made is read, changed and deleted.
LINKS: dict[tuple[str, str, str], dict[str, tuple[str, str, str]]] = {
    ("post", "/v1/messages", "202"): {
        "ReadMessage": ("get", "/v1/messages/{message_id}", "message_id"),
        "MoveMessage": ("post", "/v1/messages/{message_id}/move", "message_id"),
        "WithdrawMessage": ("delete", "/v1/messages/{message_id}", "message_id"),
    },
    ("get", "/v1/messages/{message_id}", "200"): {
        "MoveMessage": ("post", "/v1/messages/{message_id}/move", "message_id"),
        "WithdrawMessage": ("delete", "/v1/messages/{message_id}", "message_id"),
    },
    ("post", "/v1/messages/{message_id}/move", "200"): {
        "ReadMovedMessage": ("get", "/v1/messages/{message_id}", "message_id"),
        "WithdrawMovedMessage": ("delete", "/v1/messages/{message_id}", "message_id"),
    },
    ("post", "/v1/objects", "201"): {
        "ReadObject": ("get", "/v1/objects/{object_id}", "object_id"),
        "ReplaceObject": ("put", "/v1/objects/{object_id}", "object_id"),
        "ObjectVersions": ("get", "/v1/objects/{object_id}/versions", "object_id"),
        "DeleteObject": ("delete", "/v1/objects/{object_id}", "object_id"),
    },
}


def _operation_id(schema: dict[str, Any], method: str, path: str) -> str:
    return str(schema["paths"][path][method]["operationId"])


def _links(schema: dict[str, Any]) -> None:
    for (method, path, status), targets in LINKS.items():
        answer = schema["paths"][path][method]["responses"][status]
        answer["links"] = {
            name: {
                "operationId": _operation_id(schema, m, p),
                "parameters": {param: f"$response.body#/{param}"},
            }
            for name, (m, p, param) in targets.items()
        }


def document(app: FastAPI) -> dict[str, Any]:
    schema = get_openapi(
        title=app.title, version=app.version, routes=app.routes, description=app.description
    )
    _components(schema)
    for path, item in schema.get("paths", {}).items():
        for method, op in item.items():
            responses = op.setdefault("responses", {})
            for status in statuses(method, path):
                responses[str(status)] = _answer(status)
    _links(schema)
    return schema


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

"""Every route of the api declares what it answers: the OpenAPI schema shows a real shape
for each JSON success response (a model with properties, never a bare object), streams and
downloads declare their media type, and a model with fields the JSON may leave out is
returned by a route that leaves them out (`response_model_exclude_unset`)."""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel

from api.app import create_app
from lomo.settings import Settings


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app(Settings(model_provider="offline"))


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def shape_problems(spec: dict[str, Any]) -> list[str]:
    """Each 2xx response without a declared shape, as "METHOD path status: why"."""
    problems = []
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            where = f"{method.upper()} {path}"
            ok = {code: r for code, r in op["responses"].items() if code.startswith("2")}
            if not ok:
                problems.append(f"{where}: no success response")
            for code, response in ok.items():
                content = response.get("content")
                if code == "204":
                    continue
                if not content:
                    problems.append(f"{where} {code}: no content declared")
                    continue
                for media, body in content.items():
                    schema = _resolve(spec, body.get("schema") or {})
                    if media == "application/json" and not schema.get("properties"):
                        problems.append(f"{where} {code}: untyped JSON {schema}")
                    elif not schema:
                        problems.append(f"{where} {code}: {media} without a schema")
    return problems


def test_every_success_response_has_a_shape(app: FastAPI) -> None:
    spec = app.openapi()
    assert len(spec["paths"]) > 30  # the whole api
    assert shape_problems(spec) == []


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": "object", "additionalProperties": True},
        {"type": "object", "additionalProperties": {"type": "string"}},
    ],
)
def test_the_check_refuses_an_untyped_object(schema: dict[str, Any]) -> None:
    """Not vacuous: `dict[str, Any]`, `dict[str, str]` and a bare JSONResponse fail it."""
    spec = {
        "paths": {
            "/x": {
                "get": {"responses": {"200": {"content": {"application/json": {"schema": schema}}}}}
            }
        }
    }
    assert shape_problems(spec) == [f"GET /x 200: untyped JSON {schema}"]


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models inside a type: itself, or in a list, dict or union of it."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found = [annotation]
        for field in annotation.model_fields.values():
            found += _models(field.annotation)
        return found
    if get_origin(annotation) in (list, dict, Union, types.UnionType):
        return [m for arg in get_args(annotation) for m in _models(arg)]
    return []


def test_optional_fields_stay_out_of_the_json_unless_set(app: FastAPI) -> None:
    """A field that defaults to None is one the view leaves out when it does not apply
    (a message's `decision`, a card's `price`): serialized as null instead, the wire
    format would change."""
    missing = []
    for route in app.routes:
        if not isinstance(route, APIRoute) or route.response_model is None:
            continue
        sparse = [
            f"{m.__name__}.{name}"
            for m in _models(route.response_model)
            for name, f in m.model_fields.items()
            if not f.is_required()
        ]
        if sparse and not route.response_model_exclude_unset:
            missing.append((route.path, sorted(route.methods or ()), sparse))
    assert missing == []

"""Every error leaves as a problem (RFC 9457, `application/problem+json`) with Lomo's code
in `error` (lomo/problem.py, docs/api.md "Errors")."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from lomo.errors import (
    Conflict,
    FlowTooLarge,
    Forbidden,
    InvalidCursor,
    InvalidInput,
    LomoError,
    NotFound,
    RateLimited,
    TooLarge,
    Unauthorized,
    UnsupportedMediaType,
)
from lomo.problem import PROBLEM_JSON, problem

log = logging.getLogger(__name__)

# Most specific first: the first class an error is an instance of decides.
STATUS = {
    TooLarge: 413,
    UnsupportedMediaType: 415,
    InvalidCursor: 422,
    FlowTooLarge: 422,
    NotFound: 404,
    Conflict: 409,
    InvalidInput: 400,
    Unauthorized: 401,
    Forbidden: 403,
    RateLimited: 429,
}
HTTP_CODES = {
    404: "not_found",
    405: "method_not_allowed",
    401: "unauthorized",
    413: "too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


class ProblemResponse(JSONResponse):
    media_type = PROBLEM_JSON


def answer(
    status: int, code: str, detail: str, headers: dict[str, str] | None = None, **extra: object
) -> ProblemResponse:
    return ProblemResponse(problem(status, code, detail, **extra), status, headers=headers)


def field_errors(exc: RequestValidationError) -> list[dict[str, object]]:
    """Where and why, without the refused input itself (it may be huge or binary)."""
    return [
        {
            "loc": [p if isinstance(p, int) else str(p) for p in e.get("loc", ())],
            "msg": str(e.get("msg", "invalid")),
            "type": str(e.get("type", "value_error")),
        }
        for e in exc.errors()
    ]


def install(app: FastAPI) -> None:
    @app.exception_handler(LomoError)
    async def _lomo(_: Request, exc: LomoError) -> ProblemResponse:
        status = next((s for cls, s in STATUS.items() if isinstance(exc, cls)), 500)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        if isinstance(exc, RateLimited):
            headers = {"Retry-After": str(exc.extra["retry_after_seconds"])}
        extra = dict(exc.extra)
        if status == 422:  # every 422 names what it refused, as a validation error does
            loc = ["query", "cursor"] if isinstance(exc, InvalidCursor) else ["body"]
            extra["errors"] = [{"loc": loc, "msg": exc.detail, "type": exc.code}]
        return answer(status, exc.code, exc.detail, headers, **extra)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> ProblemResponse:
        errors = field_errors(exc)
        first = errors[0] if errors else {}
        loc = ".".join(str(p) for p in first.get("loc", []))  # type: ignore[attr-defined]
        detail = f"{loc}: {first.get('msg', 'invalid')}" if loc else "invalid request"
        return answer(422, "validation_error", detail, errors=errors)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> ProblemResponse:
        code = HTTP_CODES.get(exc.status_code, "http_error")
        return answer(exc.status_code, code, str(exc.detail), dict(exc.headers or {}) or None)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> ProblemResponse:
        log.exception("unhandled error", exc_info=exc)
        return answer(500, "internal_error", "the server failed on this request")

"""Every error leaves as {"error": code, "detail": sentence} (API.md)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from lomo.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    LomoError,
    NotFound,
    RateLimited,
    TooLarge,
    Unauthorized,
    UnsupportedMediaType,
)

# Most specific first: the first class an error is an instance of decides.
STATUS = {
    TooLarge: 413,
    UnsupportedMediaType: 415,
    NotFound: 404,
    Conflict: 409,
    InvalidInput: 400,
    Unauthorized: 401,
    Forbidden: 403,
    RateLimited: 429,
}


def error_body(code: str, detail: str, **extra: object) -> dict[str, object]:
    return {"error": code, "detail": detail, **extra}


def install(app: FastAPI) -> None:
    @app.exception_handler(LomoError)
    async def _lomo(_: Request, exc: LomoError) -> JSONResponse:
        status = next((s for cls, s in STATUS.items() if isinstance(exc, cls)), 500)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        if isinstance(exc, RateLimited):
            headers = {"Retry-After": str(exc.extra["retry_after_seconds"])}
        return JSONResponse(
            error_body(exc.code, exc.detail, **exc.extra), status_code=status, headers=headers
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        loc = ".".join(str(p) for p in first.get("loc", ()))
        detail = f"{loc}: {first.get('msg', 'invalid')}" if loc else "invalid request"
        return JSONResponse(error_body("validation_error", detail), status_code=422)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        code = {
            404: "not_found",
            405: "method_not_allowed",
            401: "unauthorized",
            413: "too_large",
            415: "unsupported_media_type",
            429: "rate_limited",
        }.get(exc.status_code, "http_error")
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)

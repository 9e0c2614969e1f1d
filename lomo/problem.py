"""The one error body of the api: RFC 9457 problem details (`application/problem+json`).

`type` is `about:blank`, so `title` is the status's reason phrase; `detail` says what
happened in a sentence; `error` is the stable code a client branches on (docs/api.md,
"Errors"); a validation error adds `errors`, one entry per refused field. Other members
a refusal carries (`limit_bytes`, `retry_after_seconds`, `current_version`, ...) sit
beside them. Built here, in the kernel, because refusals below the app (the Host check,
the body and rate limits) answer with the same body as the app's handlers."""

from __future__ import annotations

import json
from http import HTTPStatus

PROBLEM_JSON = "application/problem+json"
# The members every problem has; extension members never overwrite them.
CORE = ("type", "title", "status", "detail", "error")


def problem(status: int, code: str, detail: str, **extra: object) -> dict[str, object]:
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    body: dict[str, object] = {k: v for k, v in extra.items() if k not in CORE}
    return {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail or title,
        "error": code,
        **body,
    }


def problem_bytes(status: int, code: str, detail: str, **extra: object) -> bytes:
    return json.dumps(problem(status, code, detail, **extra)).encode()

"""The exception hierarchy of Lomo's kernel.

    LomoError                      root; never raised itself
    ├── ConfigError                settings unusable (placeholder secret, bad URL)
    ├── NotFound                   unknown id, or an id that belongs to another user
    ├── Conflict                   a write based on an old state (version, second answer)
    │   ├── AlreadyRead            a message its task has read cannot be withdrawn
    │   └── TakenBack              a message withdrawn or moved away cannot be again
    ├── InvalidInput               input the domain refuses (API answers 400/422)
    │   ├── TooLarge               a body or upload over its size limit (413)
    │   ├── UnsupportedMediaType   an upload of a media type not on the list (415)
    │   ├── FlowTooLarge           a flow of more nodes than MAX_FLOW_NODES (422)
    │   └── InvalidCursor          a list's page cursor that names no place in it (422)
    ├── Unauthorized               missing, bad, revoked or expired credentials
    ├── Forbidden                  valid credentials of a channel that may not do this
    ├── RateLimited                over a rate or connection limit (429, Retry-After)
    └── ModelError                 the model provider failed or answered nonsense
        └── ModelOutputError       the model's output cannot be used (non-retryable)

The API maps each class to a status code in one place (api/errors.py).
"""

from __future__ import annotations

from typing import Any


class LomoError(Exception):
    code = "error"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class ConfigError(LomoError):
    code = "config_error"


class NotFound(LomoError):
    code = "not_found"


class Conflict(LomoError):
    code = "conflict"


class AlreadyRead(Conflict):
    code = "already_read"


class TakenBack(Conflict):
    code = "taken_back"


class InvalidInput(LomoError):
    code = "invalid_input"


class TooLarge(InvalidInput):
    code = "too_large"


class UnsupportedMediaType(InvalidInput):
    code = "unsupported_media_type"


class FlowTooLarge(InvalidInput):
    code = "flow_too_large"


class InvalidCursor(InvalidInput):
    code = "invalid_cursor"


class Unauthorized(LomoError):
    code = "unauthorized"


class Forbidden(LomoError):
    code = "forbidden"


class RateLimited(LomoError):
    code = "rate_limited"

    def __init__(self, detail: str, retry_after_seconds: int, **extra: Any) -> None:
        super().__init__(detail, retry_after_seconds=retry_after_seconds, **extra)


class ModelError(LomoError):
    code = "model_error"


class ModelOutputError(ModelError):
    code = "model_output_error"

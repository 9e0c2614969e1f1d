"""The person's event stream (server-sent events)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from api.deps import CurrentUser, DbDep, SettingsDep, StreamsDep
from api.schemas.common import MAX_DB_INT
from api.schemas.events import event_schema
from api.services.events import event_stream
from lomo.errors import InvalidInput, RateLimited

router = APIRouter(prefix="/v1", tags=["events"])
STREAM_RETRY_SECONDS = 10  # Retry-After when every stream slot of the person is taken
SSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-sent events: `id: <seq>`, `event: <type>`, and `data:` a JSON "
        'object {"seq", "type", "data", "at"}; comment lines keep the stream alive',
        # Each event, one schema per type (the stream's lines per the SSE format).
        "content": {"text/event-stream": {"schema": event_schema()}},
    }
}


class LeasedStream(StreamingResponse):
    """Gives the person's stream slot back however the response ends (also when the
    client leaves before the first event, when the generator never started)."""

    def __init__(self, body: AsyncIterator[str], release: Callable[[], None]) -> None:
        super().__init__(body, media_type="text/event-stream")
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


@router.get("/events", response_class=StreamingResponse, responses=SSE)
async def stream(
    user: CurrentUser,
    db: DbDep,
    settings: SettingsDep,
    slots: StreamsDep,
    last_event_id: Annotated[str | None, Header()] = None,
    after: Annotated[int | None, Query()] = None,
    once: bool = False,
) -> StreamingResponse:
    """Resumes after `Last-Event-ID` (or `?after=`). The DB log is the source, so an api
    restart loses nothing. `once=true` returns what exists and closes (for scripts). A
    person holds at most `max_sse_per_person` open streams per api process."""
    try:
        start = after if after is not None else int(last_event_id or 0)
    except ValueError as e:
        raise InvalidInput("Last-Event-ID must be an event id (a whole number)") from e
    if not 0 <= start <= MAX_DB_INT:
        raise InvalidInput(f"an event id is between 0 and {MAX_DB_INT}")
    if not slots.acquire(user.id):
        raise RateLimited(
            f"{slots.per_person} event streams are open for this person; close one first",
            retry_after_seconds=STREAM_RETRY_SECONDS,
        )
    events = event_stream(db, user.id, start, settings.sse_poll_seconds, once)
    return LeasedStream(events, lambda: slots.release(user.id))

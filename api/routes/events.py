from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from api.deps import MAX_DB_INT, DbDep, SettingsDep, UserDep
from api.ratelimit import StreamSlots
from lomo.errors import InvalidInput, RateLimited
from lomo.events import BELL, events_after

router = APIRouter(prefix="/v1", tags=["events"])
KEEPALIVE_SECONDS = 15.0  # between comment lines that keep proxies from closing the stream
STREAM_RETRY_SECONDS = 10  # Retry-After when every stream slot of the person is taken


class _LeasedStream(StreamingResponse):
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


@router.get("/events")
async def stream(
    request: Request,
    user: UserDep,
    db: DbDep,
    settings: SettingsDep,
    last_event_id: Annotated[str | None, Header()] = None,
    after: Annotated[int | None, Query()] = None,
    once: bool = False,
) -> StreamingResponse:
    """SSE; resumes after `Last-Event-ID` (or `?after=`). The DB log is the source, so an
    api restart loses nothing. `once=true` returns what exists and closes (for scripts).
    A person holds at most `max_sse_per_person` open streams per api process."""
    try:
        start = after if after is not None else int(last_event_id or 0)
    except ValueError as e:
        raise InvalidInput("Last-Event-ID must be an event id (a whole number)") from e
    if not 0 <= start <= MAX_DB_INT:
        raise InvalidInput(f"an event id is between 0 and {MAX_DB_INT}")
    slots: StreamSlots = request.app.state.streams
    if not slots.acquire(user.id):
        raise RateLimited(
            f"{slots.per_person} event streams are open for this person; close one first",
            retry_after_seconds=STREAM_RETRY_SECONDS,
        )

    poll = settings.sse_poll_seconds
    keepalive_every = max(1, round(KEEPALIVE_SECONDS / poll))

    async def gen() -> AsyncIterator[str]:
        seq, idle = start, 0
        while True:
            bell = BELL.waiter(user.id)
            try:
                async with db.session() as s:
                    rows = await events_after(s, user.id, seq)
                for e in rows:
                    seq = e.seq
                    payload = {
                        "seq": e.seq,
                        "type": e.type,
                        "data": e.data,
                        "at": e.created_at.isoformat(),
                    }
                    yield f"id: {e.seq}\nevent: {e.type}\ndata: {json.dumps(payload)}\n\n"
                if once and not rows:
                    return
                if not rows:
                    idle += 1
                    if idle % keepalive_every == 0:
                        yield ": keepalive\n\n"
                    # Woken at once by a commit on this host (this process, or another
                    # through lomo/bell_relay.py); the poll finds what a wake-up missed.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(bell.wait(), poll)
            finally:
                BELL.forget(user.id, bell)

    return _LeasedStream(gen(), lambda: slots.release(user.id))

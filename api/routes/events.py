from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from api.deps import DbDep, UserDep
from lomo.events import events_after

router = APIRouter(prefix="/v1", tags=["events"])
POLL_SECONDS = 0.25
KEEPALIVE_EVERY = 60  # polls between comment lines that keep proxies from closing the stream


@router.get("/events")
async def stream(
    user: UserDep,
    db: DbDep,
    last_event_id: Annotated[str | None, Header()] = None,
    after: Annotated[int | None, Query()] = None,
    once: bool = False,
) -> StreamingResponse:
    """SSE; resumes after `Last-Event-ID` (or `?after=`). The DB log is the source, so an
    api restart loses nothing. `once=true` returns what exists and closes (for scripts)."""
    start = after if after is not None else int(last_event_id or 0)

    async def gen() -> AsyncIterator[str]:
        seq, idle = start, 0
        while True:
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
                if idle % KEEPALIVE_EVERY == 0:
                    yield ": keepalive\n\n"
                await asyncio.sleep(POLL_SECONDS)

    return StreamingResponse(gen(), media_type="text/event-stream")

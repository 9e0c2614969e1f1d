"""The person's timeline: what they said, replies, tasks and cards, in order."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import CurrentUser, SessionDep
from api.schemas.common import MAX_DB_INT
from api.schemas.thread import Thread
from api.services.thread import thread as timeline

router = APIRouter(prefix="/v1", tags=["thread"])


@router.get("/thread", response_model_exclude_unset=True)
async def thread(
    user: CurrentUser,
    session: SessionDep,
    after: Annotated[int, Query(ge=0, le=MAX_DB_INT)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> Thread:
    return await timeline(session, user.id, after, limit)

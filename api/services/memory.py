"""The person's correction of a memory: a new, stated version, written by the person's
MemoryWorkflow so it never races an extraction or a forget."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client, WorkflowUpdateFailedError

from api.dispatch.memory import request_correction
from api.schemas.memory import MemoryHistory, MemoryList
from api.services.pages import DEFAULT_LIMIT, encode
from lomo.db.engine import Database
from lomo.db.pages import Page
from lomo.errors import Conflict, NotFound
from lomo.ids import new_id
from lomo.settings import Settings
from memory import views
from memory.models import Evidence, Memory


async def memories(s: AsyncSession, user_id: str, scope: str | None, page: Page) -> MemoryList:
    found, last = await views.list_memories(s, user_id, scope, page)
    return MemoryList.model_validate({"memories": found, "next": encode(last) if last else None})


async def history(s: AsyncSession, user_id: str, memory_id: str, page: Page) -> MemoryHistory:
    view = await views.history(s, user_id, memory_id, page)
    last = view.pop("next_version")
    return MemoryHistory.model_validate({**view, "next": encode(str(last)) if last else None})


async def correct(
    db: Database,
    temporal: Client,
    settings: Settings,
    user_id: str,
    memory_id: str,
    content: str,
) -> MemoryHistory:
    """The correction is stored as evidence first, then applied by the workflow; answers
    with the memory's history as it is after."""
    async with db.session() as s:
        memory = await s.get(Memory, memory_id)
        if memory is None or memory.user_id != user_id:
            raise NotFound(f"no memory {memory_id}")
        if memory.status != "active":
            raise Conflict(f"memory {memory_id} was forgotten")
        ev = Evidence(
            id=new_id("evd"),
            user_id=user_id,
            source="correction",
            source_ref=f"{memory_id}:{new_id('cor')}",
            text=content.strip(),
            usable=True,
            candidates=[],
        )
        s.add(ev)
    try:
        out = await request_correction(temporal, settings, user_id, ev.id)
    except WorkflowUpdateFailedError as e:  # e.g. forgotten meanwhile by an earlier job
        raise Conflict(f"the correction was not applied: {e.cause}") from e
    async with db.session() as s:
        return await history(s, user_id, out.memory_id, Page(limit=DEFAULT_LIMIT))

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from sqlalchemy import select

from api.deps import MAX_DB_INT, DbDep, UserDep
from lomo.db.models import Event, MessageRow

router = APIRouter(prefix="/v1", tags=["thread"])
# The timeline is a view over the event log: what the person said, replies, tasks, cards.
THREAD_EVENTS = ("message.received", "task.reply", "task.created", "task.status", "card.created")


@router.get("/thread")
async def thread(
    user: UserDep,
    db: DbDep,
    after: Annotated[int, Query(ge=0, le=MAX_DB_INT)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> dict[str, Any]:
    async with db.session() as s:
        rows = list(
            await s.scalars(
                select(Event)
                .where(Event.user_id == user.id, Event.seq > after, Event.type.in_(THREAD_EVENTS))
                .order_by(Event.seq)
                .limit(limit)
            )
        )
        ids = [e.data["message_id"] for e in rows if e.type == "message.received"]
        texts = {
            m.id: m.text for m in await s.scalars(select(MessageRow).where(MessageRow.id.in_(ids)))
        }
    items = []
    for e in rows:
        item: dict[str, Any] = {"seq": e.seq, "type": e.type, "at": e.created_at.isoformat()}
        item.update(e.data)
        if e.type == "message.received":
            item["text"] = texts.get(e.data["message_id"], "")
        items.append(item)
    return {"items": items}

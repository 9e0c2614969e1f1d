"""A task's checklist steps and their wire form."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import ChecklistItem

ITEM_STATUSES = ("open", "in_progress", "done", "blocked", "skipped")
MAX_ITEMS = 50


def item_view(i: ChecklistItem) -> dict[str, Any]:
    return {
        "id": i.id,
        "title": i.title,
        "status": i.status,
        "requires_confirmation": i.requires_confirmation,
        "artifacts": i.artifacts,
        "note": i.note,
    }


async def load_items(s: AsyncSession, task_id: str) -> list[ChecklistItem]:
    rows = await s.scalars(
        select(ChecklistItem)
        .where(ChecklistItem.task_id == task_id)
        .order_by(ChecklistItem.position)
    )
    return list(rows)

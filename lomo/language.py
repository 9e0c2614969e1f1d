"""Which language to speak to a person in: the language of the task at hand."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import Task


async def task_language(s: AsyncSession, task_id: str | None) -> str | None:
    """The task's language; None (the catalogue's default) without a task."""
    if task_id is None:
        return None
    return await s.scalar(select(Task.language).where(Task.id == task_id))

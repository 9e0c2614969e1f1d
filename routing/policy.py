"""The rules routing applies to the task a message goes to, held once: when a lightweight
task becomes persistent, and how a task driven through the open API spends money."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import MessageRow, Task
from lomo.states import TaskKind
from money.policy import set_autonomy

# A lightweight task that gets this many follow-ups is promoted to persistent ("the
# person keeps revising"); the model may promote earlier.
PROMOTE_AFTER_FOLLOWUPS = 2


def promotes(task: Task, followups: int, model_promote: bool) -> bool:
    return task.kind == TaskKind.LIGHTWEIGHT and (
        model_promote or followups >= PROMOTE_AFTER_FOLLOWUPS
    )


async def confirm_paid_calls(s: AsyncSession, msg: MessageRow, task_id: str) -> None:
    """A task that a message through the open API reaches confirms each paid call one by
    one (§8.4)."""
    if msg.channel == "api":
        await set_autonomy(s, msg.user_id, task_id, "ask")

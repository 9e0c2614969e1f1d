"""The main thread's move ("that was meant for the posters"): the person's previous message
goes to the named task as a new message there, in the routing activity's transaction."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from journal.moves import mark_moved, moved_copy, notice_row, previous_message, was_read
from lomo import clock
from lomo.db.models import MessageRow, Task
from lomo.events import append_event


@dataclass
class Moved:
    old: MessageRow
    copy: MessageRow
    notice: MessageRow | None  # for a task that had read it already

    def left(self) -> tuple[str | None, str | None, str | None]:
        """The task it left, and what the main thread tells it (RoutePlan.left_*)."""
        if self.notice is not None:
            return self.old.task_id, None, self.notice.id
        return self.old.task_id, self.old.id, None


async def move_previous(s: AsyncSession, msg: MessageRow, task: Task) -> Moved | None:
    """None when there is nothing to move: no earlier message with a task, or it is in
    `task` already. The copy and the notice are marked handed over: the main thread hands
    them over itself, durably (the relay leaves them alone)."""
    old = await previous_message(s, msg)
    if old is None or old.task_id == task.id:
        return None
    copy = moved_copy(old, task.id)
    copy.handed_at = clock.now()
    s.add(copy)
    await s.flush()
    if not await mark_moved(s, old, copy.id):
        return None  # withdrawn or moved by the person meanwhile
    notice = None
    if was_read(old) and old.task_id:
        notice = notice_row(old, old.task_id, task.id, task.goal or task.id)
        s.add(notice)
    data = {"message_id": copy.id}
    await append_event(s, msg.user_id, "message.received", data)
    moved = {"message_id": old.id, "task_id": old.task_id, "to_message_id": copy.id}
    await append_event(s, msg.user_id, "message.moved", {**moved, "to_task_id": task.id})
    return Moved(old, copy, notice)

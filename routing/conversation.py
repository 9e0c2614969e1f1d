"""What the main thread remembers of the conversation: the person's latest messages with
where each went, the replies they got, and the work made lately, read from the event log
and the workspace (never from workflow state), bounded by a setting.

The router reads these lines before the person's new message, so a follow-up that names
nothing ("and one more in blue") finds the work it continues, and a question about the
conversation ("what did you just make?") is answered from what exists.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo import clock
from lomo.db.models import Event, MessageRow, Task, TaskObject, WorkObject
from routing.prompt import age, clip

TURN_CHARS = 160
RECENT_WORK = 4


@dataclass
class Said:
    who: str  # "person" | "lomo"
    text: str
    task_id: str | None


@dataclass
class Made:
    task_id: str | None
    type: str
    name: str
    at: datetime


@dataclass
class Conversation:
    said: list[Said]  # oldest first
    made: list[Made]  # newest first

    def lines(self, now: datetime) -> list[str]:
        """The router's view: one line per turn and per piece of work (task ids are for
        the router; replies to the person name the work, never the id)."""
        out = []
        for s in self.said:
            where = f" (task {s.task_id})" if s.task_id else ""
            out.append(f"- {s.who}{where}: {clip(s.text, TURN_CHARS)}")
        for m in self.made:
            where = f"task {m.task_id}" if m.task_id else "no task"
            out.append(f"- made {age(now, m.at)} ago: {m.type} “{clip(m.name, 60)}” ({where})")
        return out


async def recent_conversation(
    s: AsyncSession,
    user_id: str,
    message_id: str,
    turns: int,
    forgotten: Collection[str] = (),
    tainted: Collection[tuple[str, int, int]] = (),
) -> Conversation:
    """The `turns` latest exchanges before this message (a message and the replies after
    it), and the latest work. Zero turns: nothing is remembered. Forgotten messages and the
    replies of steps that read forgotten content (`tainted`: task, turn, step) are left
    out, as every context leaves them out."""
    if turns <= 0:
        return Conversation([], [])
    mine = await s.scalar(
        select(Event.seq).where(
            Event.user_id == user_id,
            Event.type == "message.received",
            Event.data["message_id"].as_string() == message_id,
        )
    )
    q = select(Event).where(
        Event.user_id == user_id, Event.type.in_(("message.received", "task.reply"))
    )
    if mine is not None:
        q = q.where(Event.seq < mine)
    events = list(await s.scalars(q.order_by(Event.seq.desc()).limit(turns * 3)))
    events.reverse()
    ids = [str(e.data.get("message_id")) for e in events if e.type == "message.received"]
    msgs = {m.id: m for m in await s.scalars(select(MessageRow).where(MessageRow.id.in_(ids)))}
    said: list[Said] = []
    for e in events:
        if e.type == "message.received":
            m = msgs.get(str(e.data.get("message_id")))
            if m is not None and m.id not in forgotten:
                said.append(Said("person", m.text, m.task_id))
        elif (text := str(e.data.get("text") or "")) and _step_of(e.data) not in tainted:
            task = e.data.get("task_id")
            if task is None and (asked := msgs.get(str(e.data.get("message_id")))):
                task = asked.task_id
            said.append(Said("lomo", text, str(task) if task else None))
    return Conversation(_last_turns(said, turns), await _recent_work(s, user_id))


def _step_of(data: dict[str, Any]) -> tuple[str, int, int]:
    return (str(data.get("task_id")), int(data.get("turn") or -1), int(data.get("step") or -1))


def _last_turns(said: list[Said], turns: int) -> list[Said]:
    starts = [i for i, x in enumerate(said) if x.who == "person"]
    if len(starts) <= turns:
        return said
    return said[starts[-turns] :]


async def _recent_work(s: AsyncSession, user_id: str) -> list[Made]:
    """The latest pieces, each named by what the person asked for (its task's goal):
    generated objects carry technical names, the person's words say what they are."""
    rows = await s.execute(
        select(WorkObject.type, WorkObject.name, WorkObject.created_at, Task.id, Task.goal)
        .outerjoin(TaskObject, TaskObject.object_id == WorkObject.id)
        .outerjoin(Task, Task.id == TaskObject.task_id)
        .where(WorkObject.user_id == user_id, WorkObject.deleted.is_(False))
        .order_by(WorkObject.created_at.desc())
        .limit(RECENT_WORK)
    )
    return [
        Made(task_id, type_, goal or name, clock.utc(at)) for type_, name, at, task_id, goal in rows
    ]

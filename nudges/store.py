"""The person's nudge settings, and one round of reminding: which tasks are watched, what
is due now (schedule.py decides), and the nudge itself with the line each task says.

The back-off lives in `task_nudges`; whether the person answered is read from what they
did, not kept: a message to the task or a card answer after the last nudge starts it
over. So nothing has to tell this room that the person came back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo import clock
from lomo.db.models import Card, MessageRow, Task
from lomo.errors import InvalidInput, NotFound
from lomo.events import append_event
from lomo.states import EventType, TaskStatus
from lomo.words import duration, say
from nudges.models import QuietHoursRow, TaskNudge
from nudges.schedule import (
    Policy,
    QuietHours,
    Watch,
    after_nudge,
    plan,
    valid_zone,
    wait_after,
)

# What a nudge is about: a card or an answer waits, or the work is finished.
WATCHED = (TaskStatus.WAITING_USER, TaskStatus.COMPLETED)
# A task of the person still working: a watched one may follow soon, so the nudge
# workflow keeps re-reading while one exists.
WORKING = (TaskStatus.RUNNING, TaskStatus.WAITING_GENERATION)


async def quiet_hours(s: AsyncSession, user_id: str) -> QuietHours | None:
    row = await s.get(QuietHoursRow, user_id)
    if row is None:
        return None
    return QuietHours(time.fromisoformat(row.start), time.fromisoformat(row.end), row.time_zone)


async def set_quiet_hours(
    s: AsyncSession, user_id: str, start: time, end: time, zone: str
) -> QuietHours:
    if not valid_zone(zone):
        raise InvalidInput(f"unknown time zone {zone!r} (an IANA name like Europe/Berlin)")
    row = await s.get(QuietHoursRow, user_id)
    if row is None:
        row = QuietHoursRow(user_id=user_id)
        s.add(row)
    row.start, row.end, row.time_zone = _hms(start), _hms(end), zone
    row.updated_at = clock.now()
    return QuietHours(start.replace(tzinfo=None), end.replace(tzinfo=None), zone)


async def clear_quiet_hours(s: AsyncSession, user_id: str) -> None:
    row = await s.get(QuietHoursRow, user_id)
    if row is not None:
        await s.delete(row)


def _hms(t: time) -> str:
    return t.replace(tzinfo=None, microsecond=0).isoformat()


async def set_task_nudges(s: AsyncSession, user_id: str, task_id: str, enabled: bool) -> TaskNudge:
    """The person's "don't nudge" (enabled=False) for one task, or its lifting."""
    task = await s.get(Task, task_id)
    if task is None or task.user_id != user_id:
        raise NotFound(f"no task {task_id}")
    row = await _row(s, user_id, task_id)
    row.enabled = enabled
    return row


async def task_nudges(s: AsyncSession, user_id: str, task_id: str) -> TaskNudge:
    task = await s.get(Task, task_id)
    if task is None or task.user_id != user_id:
        raise NotFound(f"no task {task_id}")
    return await s.get(TaskNudge, task_id) or TaskNudge(
        task_id=task_id, user_id=user_id, enabled=True, ignored=0
    )


async def _row(s: AsyncSession, user_id: str, task_id: str) -> TaskNudge:
    row = await s.get(TaskNudge, task_id, with_for_update=True)
    if row is None:
        row = TaskNudge(task_id=task_id, user_id=user_id, enabled=True, ignored=0)
        s.add(row)
    return row


@dataclass
class Watched:
    watches: list[Watch]
    working: bool  # a task of the person is still working
    tasks: dict[str, Task]


def horizon(policy: Policy) -> timedelta:
    """How long after a task began to wait it can still be due: the first wait and every
    later one at its longest. Older tasks are done reminding (or predate nudges)."""
    return timedelta(seconds=policy.base + policy.most * policy.cap)


async def watched(s: AsyncSession, user_id: str, now: datetime, policy: Policy) -> Watched:
    """The person's tasks a nudge may be about, each from when it began to wait (or the
    person last answered it) with its back-off; reset where the person answered since the
    last nudge."""
    recent = Task.updated_at >= now - horizon(policy)
    tasks = {
        t.id: t
        for t in await s.scalars(
            select(Task).where(Task.user_id == user_id, Task.status.in_(WATCHED), recent)
        )
    }
    working = await s.scalar(
        select(func.count()).where(Task.user_id == user_id, Task.status.in_(WORKING))
    )
    ids = list(tasks)
    rows = {
        r.task_id: r for r in await s.scalars(select(TaskNudge).where(TaskNudge.task_id.in_(ids)))
    }
    answered = await _answered(s, ids)
    watches = []
    for tid, task in sorted(tasks.items()):
        row = rows.get(tid)
        if row is not None and not row.enabled:
            continue
        said = answered.get(tid)
        since = max(_utc(task.updated_at), said) if said else _utc(task.updated_at)
        last = _utc(row.last_nudge_at) if row and row.last_nudge_at else None
        ignored = row.ignored if row else 0
        if last is not None and said is not None and said > last:
            last, ignored = None, 0  # the person answered: the back-off starts over
        watches.append(Watch(tid, since, last, ignored))
    return Watched(watches, bool(working), tasks)


async def _answered(s: AsyncSession, task_ids: list[str]) -> dict[str, datetime]:
    """When the person last did something in each task: a message (not a notice) or a
    card answer."""
    said: dict[str, datetime] = {}
    msgs = await s.execute(
        select(MessageRow.task_id, func.max(MessageRow.created_at))
        .where(
            MessageRow.task_id.in_(task_ids),
            MessageRow.target["notice"].as_string().is_(None),
        )
        .group_by(MessageRow.task_id)
    )
    cards = await s.execute(
        select(Card.task_id, func.max(Card.answered_at))
        .where(Card.task_id.in_(task_ids), Card.answered_at.is_not(None))
        .group_by(Card.task_id)
    )
    for tid, at in [*msgs.all(), *cards.all()]:
        if tid is not None and at is not None:
            said[tid] = max(said.get(tid, _utc(at)), _utc(at))
    return said


def _utc(at: datetime) -> datetime:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@dataclass
class Round:
    sent: list[str]  # the tasks this round's one nudge was about
    next_at: datetime | None  # the next nudge planned (None: none)
    working: bool  # a task of the person still works: look again before long


async def nudge_round(s: AsyncSession, user_id: str, now: datetime, policy: Policy) -> Round:
    """Send what is due at `now` as one nudge, and say when the next is due. Run again
    (an activity's retry) it sends nothing twice: a task nudged since it read the
    back-off is left out."""
    quiet = await quiet_hours(s, user_id)
    w = await watched(s, user_id, now, policy)
    p = plan(w.watches, now, policy, quiet)
    due = [x for x in w.watches if x.task_id in p.due]
    sent = [x.task_id for x in due if await _nudged(s, user_id, x, w.tasks[x.task_id], now, policy)]
    if sent:
        await _announce(s, user_id, [w.tasks[t] for t in sent], now)
    rest = [after_nudge(x, now) if x.task_id in p.due else x for x in w.watches]
    return Round(sent, plan(rest, now, policy, quiet).next_at, w.working)


async def _nudged(
    s: AsyncSession, user_id: str, x: Watch, task: Task, now: datetime, policy: Policy
) -> bool:
    """Count the nudge against the task's back-off, and the line the task says."""
    row = await _row(s, user_id, x.task_id)
    if row.last_nudge_at is not None and _utc(row.last_nudge_at) > (x.last_nudge or x.since):
        return False  # another attempt of this round nudged it already
    row.ignored, row.last_nudge_at, row.updated_at = x.ignored + 1, now, now
    lang = task.language
    about = say("nudge.card" if task.status == TaskStatus.WAITING_USER else "nudge.finished", lang)
    if row.ignored >= policy.most:
        then = say("nudge.last", lang)
    else:
        then = say("nudge.again", lang, wait=duration(wait_after(row.ignored, policy), lang))
    data = {
        "task_id": task.id,
        "text": f"{about} {then}",
        "turn": task.turn,
        "step": 0,
        "by": "runtime",
        "nudge": row.ignored,
    }
    await append_event(s, user_id, EventType.TASK_REPLY, data, at=now)
    return True


async def _announce(s: AsyncSession, user_id: str, tasks: list[Task], now: datetime) -> None:
    """The one nudge the person gets for all tasks due at once."""
    lang = tasks[0].language
    goals = ", ".join(f"“{_clip(t.goal or t.id)}”" for t in tasks)
    if len(tasks) == 1:
        text = say("nudge.batch.one", lang, goals=goals)
    else:
        text = say("nudge.batch.many", lang, count=len(tasks), goals=goals)
    data = {"task_ids": [t.id for t in tasks], "text": text, "at": now.isoformat()}
    await append_event(s, user_id, EventType.NUDGE, data, at=now)


def _clip(goal: str, most: int = 60) -> str:
    return goal if len(goal) <= most else goal[: most - 1] + "…"

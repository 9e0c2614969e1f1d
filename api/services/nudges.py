"""The person's nudge settings: stored by the nudges room, then the person's nudge
workflow is told to look again (bounded; a touch that does not go through is made up by
the workflow's own next look)."""

from __future__ import annotations

from api.dispatch import TemporalGetter
from api.dispatch.nudges import touch_nudges
from api.schemas.nudges import QuietHoursIn, QuietHoursView, TaskNudgesIn, TaskNudgesView
from api.services.handoff import within_bound
from lomo.db.engine import Database
from lomo.errors import NotFound
from lomo.settings import Settings
from nudges.models import TaskNudge
from nudges.store import (
    clear_quiet_hours,
    quiet_hours,
    set_quiet_hours,
    set_task_nudges,
    task_nudges,
)


async def get_quiet_hours(db: Database, user_id: str) -> QuietHoursView:
    async with db.session() as s:
        q = await quiet_hours(s, user_id)
    if q is None:
        raise NotFound("no quiet hours set")
    return QuietHoursView(start=q.start, end=q.end, time_zone=q.zone)


async def put_quiet_hours(
    db: Database, temporal: TemporalGetter, settings: Settings, user_id: str, body: QuietHoursIn
) -> QuietHoursView:
    async with db.session() as s:
        q = await set_quiet_hours(s, user_id, body.start, body.end, body.time_zone)
    await _touch(temporal, settings, user_id)
    return QuietHoursView(start=q.start, end=q.end, time_zone=q.zone)


async def delete_quiet_hours(
    db: Database, temporal: TemporalGetter, settings: Settings, user_id: str
) -> None:
    async with db.session() as s:
        await clear_quiet_hours(s, user_id)
    await _touch(temporal, settings, user_id)


async def get_task_nudges(db: Database, user_id: str, task_id: str) -> TaskNudgesView:
    async with db.session() as s:
        return _view(await task_nudges(s, user_id, task_id))


async def put_task_nudges(
    db: Database,
    temporal: TemporalGetter,
    settings: Settings,
    user_id: str,
    task_id: str,
    body: TaskNudgesIn,
) -> TaskNudgesView:
    async with db.session() as s:
        view = _view(await set_task_nudges(s, user_id, task_id, body.enabled))
    await _touch(temporal, settings, user_id)
    return view


def _view(row: TaskNudge) -> TaskNudgesView:
    return TaskNudgesView(
        task_id=row.task_id,
        enabled=bool(row.enabled),
        ignored=int(row.ignored or 0),
        last_nudge_at=row.last_nudge_at,
    )


async def _touch(temporal: TemporalGetter, settings: Settings, user_id: str) -> None:
    async def go() -> None:
        await touch_nudges(await temporal(), settings, user_id)

    await within_bound(go(), f"nudges of {user_id}", settings.handoff_wait_seconds)

"""Nudges: the person's quiet hours, and "don't nudge" per task."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import CurrentUser, DbDep, SettingsDep, TemporalGetterDep
from api.schemas.nudges import QuietHoursIn, QuietHoursView, TaskNudgesIn, TaskNudgesView
from api.services import nudges

router = APIRouter(prefix="/v1", tags=["nudges"])


@router.get("/me/quiet-hours")
async def get_quiet_hours(user: CurrentUser, db: DbDep) -> QuietHoursView:
    """404 while none are set."""
    return await nudges.get_quiet_hours(db, user.id)


@router.put("/me/quiet-hours")
async def put_quiet_hours(
    body: QuietHoursIn,
    user: CurrentUser,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalGetterDep,
) -> QuietHoursView:
    """Reminders that fall between `start` and `end` (the person's wall clock in
    `time_zone`) wait for the end and go out together as one."""
    return await nudges.put_quiet_hours(db, temporal, settings, user.id, body)


@router.delete("/me/quiet-hours", status_code=204)
async def delete_quiet_hours(
    user: CurrentUser, db: DbDep, settings: SettingsDep, temporal: TemporalGetterDep
) -> None:
    await nudges.delete_quiet_hours(db, temporal, settings, user.id)


@router.get("/tasks/{task_id}/nudges")
async def get_task_nudges(task_id: str, user: CurrentUser, db: DbDep) -> TaskNudgesView:
    return await nudges.get_task_nudges(db, user.id, task_id)


@router.put("/tasks/{task_id}/nudges")
async def put_task_nudges(
    task_id: str,
    body: TaskNudgesIn,
    user: CurrentUser,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalGetterDep,
) -> TaskNudgesView:
    """`enabled: false` is "don't nudge" for this task."""
    return await nudges.put_task_nudges(db, temporal, settings, user.id, task_id, body)

"""The person's quiet hours and a task's nudging (docs/api.md, "Nudges")."""

from __future__ import annotations

from datetime import datetime, time

from pydantic import BaseModel, Field


class QuietHoursIn(BaseModel):
    start: time = Field(description="wall-clock time quiet begins, e.g. 22:00")
    end: time = Field(description="wall-clock time quiet ends, e.g. 07:00 (may cross midnight)")
    time_zone: str = Field(min_length=1, max_length=64, description="IANA, e.g. Europe/Berlin")


class QuietHoursView(BaseModel):
    start: time
    end: time
    time_zone: str


class TaskNudgesIn(BaseModel):
    enabled: bool = Field(description="false: this task never reminds the person")


class TaskNudgesView(BaseModel):
    task_id: str
    enabled: bool
    ignored: int = Field(description="reminders unanswered since the person last answered")
    last_nudge_at: datetime | None

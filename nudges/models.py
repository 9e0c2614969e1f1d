"""The person's quiet hours and each task's nudging: whether it may remind, and how far
its back-off has gone."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from lomo.db.models import Base, utcnow


class QuietHoursRow(Base):
    """Wall-clock times ("22:00:00") in the person's IANA time zone."""

    __tablename__ = "quiet_hours"
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), primary_key=True)
    start: Mapped[str] = mapped_column(String(8))
    end: Mapped[str] = mapped_column(String(8))
    time_zone: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TaskNudge(Base):
    """A task's nudging: off when the person said "don't nudge"; the unanswered nudges
    since the person last answered it, and when the last one went out."""

    __tablename__ = "task_nudges"
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    enabled: Mapped[bool] = mapped_column(default=True)
    ignored: Mapped[int] = mapped_column(Integer, default=0)
    last_nudge_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

"""Context-engineering facts (docs/architecture.md#context): large tool outputs kept outside
the context, and the model-written summaries of closed history segments."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from lomo.db.models import Base, utcnow


class ToolOutput(Base):
    """A tool result too large for the context: the context shows a preview and `id` as the
    handle; `read_output(handle, offset, limit)` pages through `content`."""

    __tablename__ = "tool_outputs"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    task_id: Mapped[str] = mapped_column(String(40), index=True)
    call_id: Mapped[str] = mapped_column(String(120), unique=True)
    content: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(Integer)  # characters of content
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ContextSegment(Base):
    """The summary of one closed segment of a task's steps, written once by the model.

    `id` is the idempotency key `seg:{task_id}:{segment}`; `message_ids` are the person's
    messages the segment's steps saw (forgetting one of them deletes the summary)."""

    __tablename__ = "context_segments"
    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    task_id: Mapped[str] = mapped_column(String(40), index=True)
    segment: Mapped[int] = mapped_column(Integer)
    first_step: Mapped[int] = mapped_column(Integer)  # ordinals of the task's steps, 0-based
    last_step: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    message_ids: Mapped[list[Any]] = mapped_column(JSON, default=list)
    status: Mapped[str] = mapped_column(String(12), default="active")  # active | deleted
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

"""Routing tables: the task index the router searches (docs/architecture.md#routing).

One compact row per task (goal, summary, status, object refs, keyword text, vector id),
refreshed lazily from `tasks.updated_at`, plus an inverted term table so keyword search
over the whole index is one indexed query, however many tasks a person has.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from lomo.db.models import Base, utcnow


class TaskIndexEntry(Base):
    __tablename__ = "task_index"
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"))
    kind: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(30))
    goal: Mapped[str] = mapped_column(Text, default="")
    summary: Mapped[str] = mapped_column(Text, default="")
    language: Mapped[str] = mapped_column(String(8), default="en")
    object_refs: Mapped[list[Any]] = mapped_column(default=list)  # [{"id", "name", "type"}]
    keywords: Mapped[str] = mapped_column(Text, default="")  # canonical terms, space-separated
    vector_id: Mapped[str | None] = mapped_column(String(60), nullable=True)
    # tasks.updated_at as of the refresh: a newer one marks the entry stale.
    source_updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_active_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    refreshed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TaskIndexTerm(Base):
    __tablename__ = "task_index_terms"
    task_id: Mapped[str] = mapped_column(
        ForeignKey("task_index.task_id", ondelete="CASCADE"), primary_key=True
    )
    term: Mapped[str] = mapped_column(String(60), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(40))


Index("ix_task_index_user_active", TaskIndexEntry.user_id, TaskIndexEntry.last_active_at)
Index("ix_task_index_terms_user_term", TaskIndexTerm.user_id, TaskIndexTerm.term)


class RoutingRecord(Base):
    """What the router decided for one message (or clarify answer), and on what evidence:
    a retried activity returns this instead of deciding twice."""

    __tablename__ = "routing_records"
    key: Mapped[str] = mapped_column(String(60), primary_key=True)  # message or card id
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    message_id: Mapped[str] = mapped_column(String(40))
    plan: Mapped[dict[str, Any]] = mapped_column()
    candidates: Mapped[list[Any]] = mapped_column(default=list)  # task ids shown to the router
    model_calls: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

"""Memory tables (docs/architecture.md#memory): evidence, memories with version chains,
provenance and derivation links, episodic summaries, profile snapshots, suppressions, forget
records and which memory versions each model step used.

A derivation link says "target was made from source": forgetting follows these links from
the forgotten evidence to everything built on it. `CONFIRM` links are provenance only (the
confirmed version does not depend on the confirming evidence) and `CHANGE` links mark a new
value in time, which does not contain the old one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from lomo.db.models import Base, utcnow


class Evidence(Base):
    """A raw user message or user edit, immutable; `usable=False` once forgotten."""

    __tablename__ = "memory_evidence"
    __table_args__ = (UniqueConstraint("user_id", "source", "source_ref"),)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    source: Mapped[str] = mapped_column(String(20))  # message | edit | correction
    source_ref: Mapped[str] = mapped_column(String(80))  # msg_… for messages
    message_id: Mapped[str | None] = mapped_column(String(40), nullable=True, index=True)
    task_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    text: Mapped[str] = mapped_column(Text)
    usable: Mapped[bool] = mapped_column(default=True)
    # The judged candidates of this evidence, kept so survivors can be re-derived after a
    # forget without asking the model again: [{"candidate": {...}, "outcome", "reason"}].
    candidates: Mapped[list[Any]] = mapped_column(default=list)
    extracted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    forgotten_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Memory(Base):
    """One atomic memory: the chain of versions about one (subject, attribute) in a scope."""

    __tablename__ = "memories"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    kind: Mapped[str] = mapped_column(String(10))  # stated | inferred
    scope: Mapped[str] = mapped_column(String(10))  # profile | project | task
    task_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    subject: Mapped[str] = mapped_column(String(120))
    attribute: Mapped[str] = mapped_column(String(120))
    current_version: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[str] = mapped_column(String(12), default="active")  # active | deleted
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MemoryVersion(Base):
    __tablename__ = "memory_versions"
    __table_args__ = (UniqueConstraint("memory_id", "version"),)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    memory_id: Mapped[str] = mapped_column(ForeignKey("memories.id"), index=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    content: Mapped[str] = mapped_column(Text)  # emptied when deleted by forgetting
    value: Mapped[str] = mapped_column(Text, default="")
    relation: Mapped[str] = mapped_column(String(10))  # ORIGIN | REFINE | CHANGE | CORRECT
    status: Mapped[str] = mapped_column(String(12), default="active")  # active|superseded|deleted
    valid_from: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    valid_to: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class MemoryLink(Base):
    """Provenance and derivation: exactly one source (evidence or version) → one target
    (version or summary)."""

    __tablename__ = "memory_links"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    source_kind: Mapped[str] = mapped_column(String(10))  # evidence | version
    source_id: Mapped[str] = mapped_column(String(40), index=True)
    target_kind: Mapped[str] = mapped_column(String(10))  # version | summary
    target_id: Mapped[str] = mapped_column(String(40), index=True)
    # ORIGIN, REFINE, CONFIRM, CHANGE, CORRECT (evidence → version) or DERIVED (version → x)
    relation: Mapped[str] = mapped_column(String(10))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Summary(Base):
    """An episodic summary of one task's phase of work, built from its memory versions."""

    __tablename__ = "memory_summaries"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    task_id: Mapped[str | None] = mapped_column(String(40), nullable=True, index=True)
    text: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(12), default="active")  # active | deleted
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ProfileSnapshot(Base):
    """The small profile, versioned as a whole: each change is a new row."""

    __tablename__ = "memory_profiles"
    __table_args__ = (UniqueConstraint("user_id", "version"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    # [{"memory_id", "version_id", "version", "content"}]
    items: Mapped[list[Any]] = mapped_column(default=list)
    reason: Mapped[str] = mapped_column(String(40), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Suppression(Base):
    """Forgotten content that extraction must not store again until stated anew."""

    __tablename__ = "memory_suppressions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    subject: Mapped[str] = mapped_column(String(120), default="")
    attribute: Mapped[str] = mapped_column(String(120), default="")
    value: Mapped[str] = mapped_column(Text, default="")  # normalized value tokens
    text_hash: Mapped[str] = mapped_column(String(64), default="")  # normalized evidence text
    forget_id: Mapped[str] = mapped_column(String(40))
    lifted_by: Mapped[str | None] = mapped_column(String(40), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ForgetRecord(Base):
    """One executed forget (keyed by its card): makes the cascade idempotent on retries."""

    __tablename__ = "memory_forgets"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # the card id
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    request: Mapped[dict[str, Any]] = mapped_column(default=dict)
    evidence_ids: Mapped[list[Any]] = mapped_column(default=list)
    deleted_version_ids: Mapped[list[Any]] = mapped_column(default=list)
    rederived_version_ids: Mapped[list[Any]] = mapped_column(default=list)
    profile_version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MemoryUsage(Base):
    """Which memory versions the context of one model step contained (exclusion later)."""

    __tablename__ = "memory_usage"
    __table_args__ = (UniqueConstraint("task_id", "turn", "step", "version_id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(String(40), index=True)
    turn: Mapped[int] = mapped_column(Integer)
    step: Mapped[int] = mapped_column(Integer)
    version_id: Mapped[str] = mapped_column(String(40), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


Index("ix_memories_user_key", Memory.user_id, Memory.subject, Memory.attribute)
Index("ix_memory_versions_user_status", MemoryVersion.user_id, MemoryVersion.status)

"""The platform's business facts. Every user-owned row carries `user_id` (isolation)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from lomo import clock
from lomo.states import CardStatus, OrderStatus, RoutingStatus, TaskStatus


def utcnow() -> datetime:
    return clock.now()


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class User(Base):
    __tablename__ = "users"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # Last event sequence handed out; bumped in the same transaction as the event insert.
    event_seq: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Event(Base):
    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("user_id", "seq"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(60))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MessageRow(Base):
    """A raw user message: evidence, immutable except for its routing/processing record."""

    __tablename__ = "messages"
    __table_args__ = (UniqueConstraint("user_id", "client_message_id"),)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    text: Mapped[str] = mapped_column(Text)
    client_message_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    target: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    routing_status: Mapped[str] = mapped_column(String(20), default=RoutingStatus.PENDING)
    deterministic: Mapped[bool] = mapped_column(default=False)
    decision: Mapped[str | None] = mapped_column(String(20), nullable=True)
    task_id: Mapped[str | None] = mapped_column(String(40), nullable=True, index=True)
    processed_turn: Mapped[int | None] = mapped_column(Integer, nullable=True)
    processed_step: Mapped[int | None] = mapped_column(Integer, nullable=True)
    channel: Mapped[str] = mapped_column(String(10), default="app")  # app | api
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # When Temporal took it (None: stored, not yet handed over; api/relay.py finishes it).
    handed_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True, index=True
    )
    # When a model step took it (its task has read it): a withdrawal or a move is
    # conditional on this being unset, the step's taking on the other two being unset.
    read_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    withdrawn_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # A move: the copy in the other task (on this one), the original (on the copy).
    moved_to: Mapped[str | None] = mapped_column(String(40), nullable=True)
    moved_from: Mapped[str | None] = mapped_column(String(40), nullable=True)


class Task(Base):
    __tablename__ = "tasks"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    kind: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(30), default=TaskStatus.RUNNING)
    goal: Mapped[str] = mapped_column(Text, default="")
    summary: Mapped[str] = mapped_column(Text, default="")
    language: Mapped[str] = mapped_column(String(8), default="en")
    turn: Mapped[int] = mapped_column(Integer, default=0)
    waiting_on: Mapped[list[Any]] = mapped_column(JSON, default=list)
    status_reason: Mapped[str] = mapped_column(Text, default="")
    briefing: Mapped[str] = mapped_column(Text, default="")
    # The fencing token of the latest status the task's workflow wrote (its workflow time,
    # in microseconds): a stale writer's older status is refused (journal/statements.py).
    status_fence: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ModelStep(Base):
    """One inference of a task: the context sent and the decision received."""

    __tablename__ = "model_steps"
    __table_args__ = (UniqueConstraint("task_id", "turn", "step"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), index=True)
    turn: Mapped[int] = mapped_column(Integer)
    step: Mapped[int] = mapped_column(Integer)
    context: Mapped[dict[str, Any]] = mapped_column(JSON)
    response: Mapped[dict[str, Any]] = mapped_column(JSON)
    # The finished jobs this step was shown (also in `context`), NULL when none: read by
    # every later step, which must not parse every stored context for it (migration 0011).
    reported_orders: Mapped[list[str] | None] = mapped_column(
        JSON(none_as_null=True), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ToolCall(Base):
    """The journal of side effects, keyed by the business idempotency key `call_id`."""

    __tablename__ = "tool_calls"
    call_id: Mapped[str] = mapped_column(String(120), primary_key=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), index=True)
    tool_use_id: Mapped[str] = mapped_column(String(80))
    name: Mapped[str] = mapped_column(String(60))
    input: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(20), default="started")
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class GenerationOrder(Base):
    """A paid generation call; unique per (workspace, idempotency key = call_id)."""

    __tablename__ = "generation_orders"
    __table_args__ = (UniqueConstraint("workspace_id", "idempotency_key"),)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    workspace_id: Mapped[str] = mapped_column(String(40), index=True)  # the user's workspace
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), index=True)
    idempotency_key: Mapped[str] = mapped_column(String(120))
    kind: Mapped[str] = mapped_column(String(10))
    model: Mapped[str] = mapped_column(String(60))
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    upstream_job_id: Mapped[str | None] = mapped_column(String(80), nullable=True, index=True)
    # created < submitted < queued < running < succeeded|failed (monotonic; terminal is final)
    status: Mapped[str] = mapped_column(String(20), default=OrderStatus.CREATED)
    progress: Mapped[float] = mapped_column(default=0.0)
    last_seq: Mapped[int] = mapped_column(Integer, default=-1)
    result_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    object_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    price_cents: Mapped[int] = mapped_column(Integer, default=0)  # quoted and reserved
    # Set (atomically, once) right before the upstream POST; with no job id recorded after
    # the submit timeout the outcome is unclear: failed and refunded, never resubmitted.
    submit_started_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class WorkObject(Base):
    __tablename__ = "objects"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    type: Mapped[str] = mapped_column(String(20))
    name: Mapped[str] = mapped_column(String(300))
    version: Mapped[int] = mapped_column(Integer, default=1)
    deleted: Mapped[bool] = mapped_column(default=False)
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ObjectVersion(Base):
    __tablename__ = "object_versions"
    object_id: Mapped[str] = mapped_column(ForeignKey("objects.id"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    content: Mapped[dict[str, Any]] = mapped_column(JSON)
    blob_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    media_type: Mapped[str | None] = mapped_column(String(80), nullable=True)
    created_by: Mapped[str] = mapped_column(String(160))  # "user" or "task:{id}:{call_id}"
    # The tool call that made this version: a retried call finds it and applies nothing twice.
    call_id: Mapped[str | None] = mapped_column(String(120), nullable=True, unique=True)
    summary: Mapped[str] = mapped_column(Text, default="")  # what changed against the previous
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TaskObject(Base):
    __tablename__ = "task_objects"
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), primary_key=True)
    object_id: Mapped[str] = mapped_column(ForeignKey("objects.id"), primary_key=True)
    role: Mapped[str] = mapped_column(String(20), default="artifact")
    seen_version: Mapped[int] = mapped_column(Integer, default=0)
    # The task has been told the object is deleted (its notice is then no longer shown).
    deletion_seen: Mapped[bool] = mapped_column(default=False)


Index("ix_tasks_user_status", Task.user_id, Task.status)


class Card(Base):
    """A question to the person (confirm, select, clarify, price, forget, delete).

    Answered only by an authenticated action of the person; `key` makes creation idempotent
    (e.g. the call_id of the tool call that needs the confirmation)."""

    __tablename__ = "cards"
    __table_args__ = (UniqueConstraint("user_id", "key"),)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    task_id: Mapped[str | None] = mapped_column(String(40), nullable=True, index=True)
    kind: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(20), default=CardStatus.OPEN)
    title: Mapped[str] = mapped_column(Text)
    options: Mapped[list[Any]] = mapped_column(JSON, default=list)
    price_cents: Mapped[int | None] = mapped_column(Integer, nullable=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    key: Mapped[str | None] = mapped_column(String(160), nullable=True)
    answer: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    answered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # When the answer's hand-offs to Temporal all went through (None on an answered card: not
    # yet; api/relay.py finishes them).
    handed_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True, index=True
    )


class ChecklistItem(Base):
    """One step of a task's execution checklist; owned by the runtime, proposed by the model
    through `update_checklist`
    (docs/architecture.md#turns-the-checklist-and-the-stop-check)."""

    __tablename__ = "checklist_items"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(Text)
    # open | in_progress | done | blocked | skipped
    status: Mapped[str] = mapped_column(String(20), default="open")
    requires_confirmation: Mapped[bool] = mapped_column(default=False)
    confirmed_by_card: Mapped[str | None] = mapped_column(String(40), nullable=True)
    artifacts: Mapped[list[Any]] = mapped_column(JSON, default=list)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    note: Mapped[str] = mapped_column(Text, default="")
    done_turn: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ApiToken(Base):
    """A token for the open API (programmatic clients). Tasks it drives confirm every paid
    call one by one (docs/api.md#tokens); the person's app token is `users.token_hash`."""

    __tablename__ = "api_tokens"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class RateBucket(Base):
    """One rate-limit key's bucket, shared by the api replicas (api/ratelimit.py): `tat` is
    when the bucket would be full again (the generic cell rate algorithm's theoretical
    arrival time), in seconds since the epoch on the database's clock."""

    __tablename__ = "rate_buckets"
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    tat: Mapped[float] = mapped_column(Float(precision=53))

"""Flow tables: one row per run, one per node of a run, and the result cache keyed by
node id and content hash (a result is reused, at no cost, wherever its hash recurs)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from lomo.db.models import Base, utcnow
from lomo.states import FlowNodeStatus, FlowRunStatus


class FlowRun(Base):
    __tablename__ = "flow_runs"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    flow_id: Mapped[str] = mapped_column(String(40), index=True)
    task_id: Mapped[str | None] = mapped_column(String(40), nullable=True, index=True)
    attempt: Mapped[int] = mapped_column(Integer, default=1)  # a resume is the next attempt
    status: Mapped[str] = mapped_column(String(20), default=FlowRunStatus.PLANNING)
    version: Mapped[int] = mapped_column(Integer)  # the flow version last planned
    total_nodes: Mapped[int] = mapped_column(Integer, default=0)
    price_cents: Mapped[int] = mapped_column(Integer, default=0)  # what must run, quoted
    card_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class FlowRunNode(Base):
    __tablename__ = "flow_run_nodes"
    run_id: Mapped[str] = mapped_column(ForeignKey("flow_runs.id"), primary_key=True)
    node_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    status: Mapped[str] = mapped_column(String(20), default=FlowNodeStatus.PENDING)
    hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    version: Mapped[int | None] = mapped_column(Integer, nullable=True)  # flow version used
    order_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    object_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Finished on a definition the person changed meanwhile: kept, but a re-run redoes it.
    stale: Mapped[bool] = mapped_column(default=False)
    # What the node's hash covered (flows/graph.narrowed_hash), digests only: a later run
    # compares it with the node's basis then to say why the node is made again.
    basis: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class FlowResult(Base):
    __tablename__ = "flow_results"
    flow_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    node_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    object_id: Mapped[str] = mapped_column(String(40))
    order_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

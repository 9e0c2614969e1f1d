"""Money tables: an account per user, an append-only ledger, budget settings, approvals,
plan budgets and autonomy levels (three separate things: budget, approval, autonomy)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from lomo.db.models import Base, utcnow


class Account(Base):
    """Running totals of the ledger, locked for every change. Invariant, to the cent:
    balance + reserved + spent == deposits."""

    __tablename__ = "money_accounts"
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), primary_key=True)
    balance_cents: Mapped[int] = mapped_column(Integer, default=0)
    reserved_cents: Mapped[int] = mapped_column(Integer, default=0)
    spent_cents: Mapped[int] = mapped_column(Integer, default=0)
    deposits_cents: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LedgerEntry(Base):
    """deposit | reserve | settle | refund | reverse (a settled charge given back). Unique
    per (user, kind, key): a key (the call_id) is reserved at most once and closed at most
    once, whoever retries."""

    __tablename__ = "ledger_entries"
    __table_args__ = (UniqueConstraint("user_id", "kind", "key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    kind: Mapped[str] = mapped_column(String(10))
    amount_cents: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(160))
    order_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    task_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    # How a reservation was authorized: free (under the thresholds) | plan | confirmed.
    grant: Mapped[str | None] = mapped_column(String(12), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class BudgetSettings(Base):
    __tablename__ = "budget_settings"
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), primary_key=True)
    free_confirm_cents: Mapped[int] = mapped_column(Integer)  # per operation, no question
    daily_free_cents: Mapped[int] = mapped_column(Integer)  # per UTC day, no question
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Approval(Base):
    """A person's approval: of one call (key = call_id) or of a plan budget (key = card id
    or api request). Created only by an authenticated card action or API call."""

    __tablename__ = "approvals"
    __table_args__ = (UniqueConstraint("user_id", "key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    task_id: Mapped[str | None] = mapped_column(String(40), nullable=True, index=True)
    kind: Mapped[str] = mapped_column(String(10))  # call | plan
    key: Mapped[str] = mapped_column(String(160))
    amount_cents: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(10))  # card | api
    card_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PlanBudget(Base):
    """The total a person approved for one task's plan; paid calls within it ask nothing."""

    __tablename__ = "plan_budgets"
    task_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    approved_cents: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TaskAutonomy(Base):
    """How much a task may do without asking: `ask` (every paid call is confirmed) or
    `within_budget` (free thresholds and an approved plan budget apply; the default)."""

    __tablename__ = "task_autonomy"
    task_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    level: Mapped[str] = mapped_column(String(20))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Payment(Base):
    """A top-up at the payment provider: created here, paid there, and booked as a
    `deposit` (ledger key `payment:<id>`) once the provider's signed webhook says it
    succeeded. `status` only moves forward: created → pending → succeeded | failed."""

    __tablename__ = "payments"
    __table_args__ = (UniqueConstraint("user_id", "request_key"),)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    amount_cents: Mapped[int] = mapped_column(Integer)
    currency: Mapped[str] = mapped_column(String(3), default="EUR")
    status: Mapped[str] = mapped_column(String(12))
    # The person's request id (a retried POST makes no second payment).
    request_key: Mapped[str] = mapped_column(String(160))
    provider_id: Mapped[str | None] = mapped_column(String(80), nullable=True, unique=True)
    checkout_url: Mapped[str | None] = mapped_column(String(300), nullable=True)
    error: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)

"""The person's budget, a task's plan budget and autonomy."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class BudgetSettingsIn(BaseModel):
    free_confirm_amount: int | None = Field(default=None, ge=0, le=10_000_000)
    daily_free_limit: int | None = Field(default=None, ge=0, le=10_000_000)


class PlanBudgetIn(BaseModel):
    amount_cents: int = Field(gt=0, le=10_000_000)
    request_id: str | None = Field(default=None, max_length=120)  # makes a retry harmless


class AutonomyIn(BaseModel):
    level: Literal["ask", "within_budget"]


class BudgetSettings(BaseModel):
    free_confirm_amount: int
    daily_free_limit: int


class Budget(BaseModel):
    currency: Literal["EUR"]
    balance: int
    reserved: int
    spent: int
    deposits: int
    daily_free_used: int
    settings: BudgetSettings


class PlanBudget(BaseModel):
    approved: int
    used: int


class TaskBudget(BaseModel):
    task_id: str
    autonomy: str = Field(description="ask or within_budget")
    plan_budget: PlanBudget | None


class TopUpIn(BaseModel):
    amount_cents: int = Field(gt=0, le=10_000_000)
    request_id: str | None = Field(default=None, max_length=120)  # makes a retry harmless


class TopUp(BaseModel):
    payment_id: str
    amount_cents: int
    currency: Literal["EUR"]
    status: str = Field(description="created | pending | succeeded | failed")
    checkout_url: str | None
    error: str | None
    created_at: str
    completed_at: str | None
    balance: int = Field(description="the person's balance now, in cents")


class PaymentReport(BaseModel):
    """A payment provider's webhook, bounded so no value can break a column."""

    model_config = ConfigDict(extra="allow")
    payment_id: str = Field(min_length=1, max_length=80)
    reference: str = Field(min_length=1, max_length=40)
    status: str = Field(min_length=1, max_length=12)
    amount_cents: int = Field(ge=0, le=2**31 - 1)
    currency: str = Field(min_length=3, max_length=3)
    error: str | None = Field(default=None, max_length=500)


class PaymentAck(BaseModel):
    ok: bool
    changed: bool = Field(description="false for a duplicate or out-of-order report")
    deposited: bool = Field(description="true when this report booked the deposit")

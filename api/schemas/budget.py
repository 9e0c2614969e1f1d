"""The person's budget, a task's plan budget and autonomy."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


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

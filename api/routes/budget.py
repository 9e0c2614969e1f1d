"""Budget, plan budgets and autonomy: every approval here is an authenticated call of the
person (the bearer token), never something a model or a tool said."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.deps import DbDep, SettingsDep, UserDep
from lomo.ids import new_id
from money.policy import approve_plan, put_budget_settings, set_autonomy
from money.views import budget_view, own_task, task_budget_view

router = APIRouter(prefix="/v1", tags=["budget"])


class BudgetSettingsIn(BaseModel):
    free_confirm_amount: int | None = Field(default=None, ge=0, le=10_000_000)
    daily_free_limit: int | None = Field(default=None, ge=0, le=10_000_000)


class PlanBudgetIn(BaseModel):
    amount_cents: int = Field(gt=0, le=10_000_000)
    request_id: str | None = Field(default=None, max_length=120)  # makes a retry harmless


class AutonomyIn(BaseModel):
    level: Literal["ask", "within_budget"]


@router.get("/budget")
async def get_budget(user: UserDep, db: DbDep, settings: SettingsDep) -> dict[str, Any]:
    async with db.session() as s:
        return await budget_view(s, user.id, settings)


@router.put("/budget/settings")
async def put_settings(
    body: BudgetSettingsIn, user: UserDep, db: DbDep, settings: SettingsDep
) -> dict[str, Any]:
    async with db.session() as s:
        await put_budget_settings(
            s, user.id, settings, body.free_confirm_amount, body.daily_free_limit
        )
        return await budget_view(s, user.id, settings)


@router.get("/tasks/{task_id}/budget")
async def get_task_budget(task_id: str, user: UserDep, db: DbDep) -> dict[str, Any]:
    async with db.session() as s:
        return await task_budget_view(s, user.id, task_id)


@router.post("/tasks/{task_id}/budget")
async def approve_task_budget(
    task_id: str, body: PlanBudgetIn, user: UserDep, db: DbDep
) -> dict[str, Any]:
    async with db.session() as s:
        await own_task(s, user.id, task_id)
        key = f"api:{task_id}:{body.request_id or new_id('req')}"
        await approve_plan(s, user.id, task_id, body.amount_cents, key, "api")
        return await task_budget_view(s, user.id, task_id)


@router.post("/tasks/{task_id}/autonomy")
async def put_autonomy(task_id: str, body: AutonomyIn, user: UserDep, db: DbDep) -> dict[str, Any]:
    async with db.session() as s:
        await own_task(s, user.id, task_id)
        await set_autonomy(s, user.id, task_id, body.level)
        return await task_budget_view(s, user.id, task_id)

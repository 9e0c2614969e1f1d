"""Budget, plan budgets and autonomy: every approval here is an authenticated call of the
person in their app, never something a model, a tool or a program with an API token said
(an API token may read them; changing them answers 403)."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import AppUser, CurrentUser, SessionDep, SettingsDep
from api.schemas.budget import AutonomyIn, Budget, BudgetSettingsIn, PlanBudgetIn, TaskBudget
from lomo.ids import new_id
from money.policy import approve_plan, put_budget_settings, set_autonomy
from money.views import budget_view, own_task, task_budget_view

router = APIRouter(prefix="/v1", tags=["budget"])


@router.get("/budget")
async def get_budget(user: CurrentUser, session: SessionDep, settings: SettingsDep) -> Budget:
    return Budget.model_validate(await budget_view(session, user.id, settings))


@router.put("/budget/settings")
async def put_settings(
    body: BudgetSettingsIn, user: AppUser, session: SessionDep, settings: SettingsDep
) -> Budget:
    await put_budget_settings(
        session, user.id, settings, body.free_confirm_amount, body.daily_free_limit
    )
    return Budget.model_validate(await budget_view(session, user.id, settings))


@router.get("/tasks/{task_id}/budget")
async def get_task_budget(task_id: str, user: CurrentUser, session: SessionDep) -> TaskBudget:
    return TaskBudget.model_validate(await task_budget_view(session, user.id, task_id))


@router.post("/tasks/{task_id}/budget")
async def approve_task_budget(
    task_id: str, body: PlanBudgetIn, user: AppUser, session: SessionDep
) -> TaskBudget:
    await own_task(session, user.id, task_id)
    key = f"api:{task_id}:{body.request_id or new_id('req')}"
    await approve_plan(session, user.id, task_id, body.amount_cents, key, "api")
    return TaskBudget.model_validate(await task_budget_view(session, user.id, task_id))


@router.post("/tasks/{task_id}/autonomy")
async def put_autonomy(
    task_id: str, body: AutonomyIn, user: AppUser, session: SessionDep
) -> TaskBudget:
    await own_task(session, user.id, task_id)
    await set_autonomy(session, user.id, task_id, body.level)
    return TaskBudget.model_validate(await task_budget_view(session, user.id, task_id))

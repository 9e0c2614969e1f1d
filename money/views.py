"""Read models of the budget for the API (no HTTP here)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import Task
from lomo.errors import NotFound
from lomo.settings import Settings
from money.ledger import lock_account
from money.models import Account, PlanBudget
from money.policy import autonomy, budget_settings, daily_free_used, plan_used


async def budget_view(s: AsyncSession, user_id: str, settings: Settings) -> dict[str, Any]:
    acc = await s.get(Account, user_id) or await lock_account(
        s, user_id, settings.initial_credit_cents
    )  # a read takes no lock unless the account must be created first
    bs = await budget_settings(s, user_id, settings)
    return {
        "currency": "EUR",
        "balance": acc.balance_cents,
        "reserved": acc.reserved_cents,
        "spent": acc.spent_cents,
        "deposits": acc.deposits_cents,
        "daily_free_used": await daily_free_used(s, user_id),
        "settings": {
            "free_confirm_amount": bs.free_confirm_cents,
            "daily_free_limit": bs.daily_free_cents,
        },
    }


async def own_task(s: AsyncSession, user_id: str, task_id: str) -> Task:
    task = await s.get(Task, task_id)
    if task is None or task.user_id != user_id:
        raise NotFound(f"no task {task_id}")
    return task


async def task_budget_view(s: AsyncSession, user_id: str, task_id: str) -> dict[str, Any]:
    await own_task(s, user_id, task_id)
    plan = await s.get(PlanBudget, task_id)
    return {
        "task_id": task_id,
        "autonomy": await autonomy(s, task_id),
        "plan_budget": None
        if plan is None
        else {"approved": plan.approved_cents, "used": await plan_used(s, user_id, task_id)},
    }

"""Authorization of paid calls: budget settings, plan budgets, approvals, autonomy.

Approvals are created here only by `approve_call` / `approve_plan`, which are called from
two places: the `price` card's in-transaction effect (an authenticated card action) and
the budget API routes (an authenticated API call). Nothing a model, a tool output or a
message text says reaches these functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time
from typing import Literal

from sqlalchemy import ColumnElement, and_, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from lomo import clock
from lomo.errors import InvalidInput
from lomo.events import append_event
from lomo.settings import Settings
from lomo.states import EventType
from money.ledger import lock_account
from money.models import Approval, BudgetSettings, LedgerEntry, PlanBudget, TaskAutonomy

AUTONOMY_LEVELS = ("ask", "within_budget")
DEFAULT_AUTONOMY = "within_budget"
Grant = Literal["confirmed", "plan", "free"]


def now() -> datetime:
    return clock.now()


async def budget_settings(s: AsyncSession, user_id: str, settings: Settings) -> BudgetSettings:
    row = await s.get(BudgetSettings, user_id)
    if row is None:
        return BudgetSettings(
            user_id=user_id,
            free_confirm_cents=settings.free_confirm_cents,
            daily_free_cents=settings.daily_free_cents,
        )
    return row


async def put_budget_settings(
    s: AsyncSession, user_id: str, settings: Settings, free_confirm: int | None, daily: int | None
) -> BudgetSettings:
    for v in (free_confirm, daily):
        if v is not None and v < 0:
            raise InvalidInput("amounts are cents and must not be negative")
    # Account lock first: the one lock order of every money transaction (see ledger.py).
    await lock_account(s, user_id, settings.initial_credit_cents)
    row = await s.get(BudgetSettings, user_id, with_for_update=True)
    if row is None:
        row = await budget_settings(s, user_id, settings)
        s.add(row)
    if free_confirm is not None:
        row.free_confirm_cents = free_confirm
    if daily is not None:
        row.daily_free_cents = daily
    row.updated_at = now()
    await s.flush()
    await append_event(
        s,
        user_id,
        EventType.BUDGET_CHANGED,
        {
            "settings": {
                "free_confirm_amount": row.free_confirm_cents,
                "daily_free_limit": row.daily_free_cents,
            }
        },
    )
    return row


async def _unrefunded_reserves(
    s: AsyncSession, user_id: str, grant: str, *conditions: ColumnElement[bool]
) -> int:
    """Cents reserved under `grant` (and `conditions`), less what was given back of them."""
    refund = LedgerEntry.__table__.alias("refund")
    kept = LedgerEntry.amount_cents - func.coalesce(refund.c.amount_cents, 0)
    used = await s.scalar(
        select(func.coalesce(func.sum(kept), 0))
        .select_from(LedgerEntry)
        .outerjoin(
            refund,
            and_(
                refund.c.user_id == LedgerEntry.user_id,
                refund.c.key == LedgerEntry.key,
                # A refund of a failed order, or the reversal of a settled one whose
                # result was unusable: either way the person got nothing for it. A
                # cancelled order's refund is the part beyond its partial price (at most
                # one of these per key).
                refund.c.kind.in_(("refund", "reverse")),
            ),
        )
        .where(
            LedgerEntry.user_id == user_id,
            LedgerEntry.kind == "reserve",
            LedgerEntry.grant == grant,
            *conditions,
        )
    )
    return int(used or 0)


async def daily_free_used(s: AsyncSession, user_id: str) -> int:
    """Cents reserved today without a question, minus what was refunded of those."""
    day = datetime.combine(now().date(), time.min, tzinfo=UTC)
    return await _unrefunded_reserves(s, user_id, "free", LedgerEntry.created_at >= day)


async def plan_used(s: AsyncSession, user_id: str, task_id: str) -> int:
    return await _unrefunded_reserves(s, user_id, "plan", LedgerEntry.task_id == task_id)


async def autonomy(s: AsyncSession, task_id: str) -> str:
    row = await s.get(TaskAutonomy, task_id)
    return row.level if row else DEFAULT_AUTONOMY


async def set_autonomy(s: AsyncSession, user_id: str, task_id: str, level: str) -> None:
    if level not in AUTONOMY_LEVELS:
        raise InvalidInput(f"autonomy level must be one of {', '.join(AUTONOMY_LEVELS)}")
    row = await s.get(TaskAutonomy, task_id, with_for_update=True)
    if row is None:
        s.add(TaskAutonomy(task_id=task_id, user_id=user_id, level=level, updated_at=now()))
    else:
        row.level, row.updated_at = level, now()
    await append_event(
        s, user_id, EventType.BUDGET_CHANGED, {"task_id": task_id, "autonomy": level}
    )


async def approve_call(
    s: AsyncSession, user_id: str, task_id: str | None, call_id: str, amount: int, card_id: str
) -> None:
    """The person confirmed one paid call's price (card action only)."""
    if await s.scalar(select(Approval).where(Approval.user_id == user_id, Approval.key == call_id)):
        return
    s.add(
        Approval(
            user_id=user_id,
            task_id=task_id,
            kind="call",
            key=call_id,
            amount_cents=amount,
            source="card",
            card_id=card_id,
        )
    )
    await s.flush()


async def approve_plan(
    s: AsyncSession,
    user_id: str,
    task_id: str,
    amount: int,
    key: str,
    source: str,
    card_id: str | None = None,
) -> PlanBudget:
    """Add an approved amount to the task's plan budget, once per `key`."""
    if amount <= 0:
        raise InvalidInput("a plan budget must be a positive amount of cents")
    plan = await s.get(PlanBudget, task_id, with_for_update=True)
    if plan is None:
        plan = PlanBudget(task_id=task_id, user_id=user_id, approved_cents=0, updated_at=now())
        s.add(plan)
    if await s.scalar(select(Approval).where(Approval.user_id == user_id, Approval.key == key)):
        return plan
    s.add(
        Approval(
            user_id=user_id,
            task_id=task_id,
            kind="plan",
            key=key,
            amount_cents=amount,
            source=source,
            card_id=card_id,
        )
    )
    await s.flush()
    # An atomic increment: two approvals at once never lose one (SQLite has no row lock).
    await s.execute(
        update(PlanBudget)
        .where(PlanBudget.task_id == task_id)
        .values(approved_cents=PlanBudget.approved_cents + amount, updated_at=now())
    )
    await s.refresh(plan)
    await append_event(
        s,
        user_id,
        EventType.BUDGET_CHANGED,
        {"task_id": task_id, "plan_budget": plan.approved_cents, "added": amount},
    )
    return plan


@dataclass
class Decision:
    grant: Grant | None  # None: the person must confirm first
    reason: str


async def authorize(
    s: AsyncSession, user_id: str, task_id: str, call_id: str, price: int, settings: Settings
) -> Decision:
    """Budget, approval and autonomy, in this order: an explicit approval of this call;
    `ask` autonomy asks; an approved plan budget covers it or asks (never falls back to the
    free thresholds once a plan exists); else the free-confirm amount and daily limit."""
    approval = await s.scalar(
        select(Approval).where(
            Approval.user_id == user_id, Approval.key == call_id, Approval.kind == "call"
        )
    )
    if approval is not None and approval.amount_cents >= price:
        return Decision("confirmed", "confirmed by the person")
    if await autonomy(s, task_id) == "ask":
        return Decision(None, "this task asks before every paid call")
    plan = await s.get(PlanBudget, task_id)
    if plan is not None and plan.user_id == user_id:
        used = await plan_used(s, user_id, task_id)
        if used + price <= plan.approved_cents:
            return Decision("plan", f"within the approved plan budget ({used}+{price} cents)")
        return Decision(
            None,
            f"exceeds the approved plan budget: {used} of {plan.approved_cents} cents used, "
            f"this costs {price}",
        )
    bs = await budget_settings(s, user_id, settings)
    if price > bs.free_confirm_cents:
        return Decision(None, f"{price} cents is over the free-confirm amount")
    used = await daily_free_used(s, user_id)
    if used + price > bs.daily_free_cents:
        return Decision(None, f"the daily free-confirm limit would be exceeded ({used} used)")
    return Decision("free", "under the free-confirm thresholds")

"""The ledger: account totals plus append-only entries, changed only under the account lock.

deposit: deposits += a, balance += a · reserve: balance -= a, reserved += a ·
settle: reserved -= a, spent += a · refund: reserved -= a, balance += a.
Each (user, kind, key) exists at most once (unique constraint), so a retried or raced
reserve/settle/refund for one call_id has no second effect.

Lock order in every transaction that touches money: (an existing order row) → the account
→ the per-user event counter (append_event). The account lock comes before any event.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lomo import clock
from lomo.db.models import GenerationOrder
from lomo.events import append_event
from lomo.states import TERMINAL_ORDER, EventType, OrderStatus
from lomo.telemetry import MONEY_CENTS
from money.catalogue import cancel_charge
from money.models import Account, LedgerEntry

INITIAL_KEY = "initial-credit"


def now() -> datetime:
    return clock.now()


class InsufficientBalance(Exception):
    def __init__(self, balance: int, needed: int) -> None:
        super().__init__(f"balance {balance} cents, needed {needed} cents")
        self.balance, self.needed = balance, needed


async def lock_account(s: AsyncSession, user_id: str, initial_credit: int) -> Account:
    """Create the account on first use (with its initial credit), then take its lock.

    The lock is a write (an UPDATE): a row lock on Postgres, the database write lock on
    SQLite. Call it first in a transaction so every read after it is current."""
    dialect = s.get_bind().dialect.name
    ins = (pg_insert if dialect == "postgresql" else sqlite_insert)(Account).values(
        user_id=user_id,
        balance_cents=0,
        reserved_cents=0,
        spent_cents=0,
        deposits_cents=0,
        updated_at=now(),
    )
    created = await s.scalar(
        ins.on_conflict_do_nothing(index_elements=["user_id"]).returning(Account.user_id)
    )
    await s.execute(update(Account).where(Account.user_id == user_id).values(updated_at=now()))
    acc = await s.get(Account, user_id, populate_existing=True)
    assert acc is not None
    if created is not None and initial_credit > 0:
        await _entry(s, acc, "deposit", initial_credit, INITIAL_KEY)
    return acc


@dataclass
class Totals:
    balance: int
    reserved: int
    spent: int
    deposits: int


async def _entry(
    s: AsyncSession,
    acc: Account,
    kind: str,
    amount: int,
    key: str,
    *,
    order_id: str | None = None,
    task_id: str | None = None,
    grant: str | None = None,
) -> LedgerEntry | None:
    """Append one entry and move the totals; None if (kind, key) was already booked."""
    old = await s.scalar(
        select(LedgerEntry).where(
            LedgerEntry.user_id == acc.user_id, LedgerEntry.kind == kind, LedgerEntry.key == key
        )
    )
    if old is not None:
        return None
    if kind == "deposit":
        acc.deposits_cents += amount
        acc.balance_cents += amount
    elif kind == "reserve":
        if acc.balance_cents < amount:
            raise InsufficientBalance(acc.balance_cents, amount)
        acc.balance_cents -= amount
        acc.reserved_cents += amount
    elif kind == "settle":
        acc.reserved_cents -= amount
        acc.spent_cents += amount
    elif kind == "refund":
        acc.reserved_cents -= amount
        acc.balance_cents += amount
    elif kind == "reverse":
        acc.spent_cents -= amount
        acc.balance_cents += amount
    else:
        raise ValueError(kind)
    e = LedgerEntry(
        user_id=acc.user_id,
        kind=kind,
        amount_cents=amount,
        key=key,
        order_id=order_id,
        task_id=task_id,
        grant=grant,
    )
    s.add(e)
    await s.flush()
    MONEY_CENTS.labels(kind).inc(amount)
    await append_event(
        s,
        acc.user_id,
        EventType.BUDGET_CHANGED,
        {
            "entry": kind,
            "amount_cents": amount,
            "order_id": order_id,
            "task_id": task_id,
            "balance": acc.balance_cents,
            "reserved": acc.reserved_cents,
        },
    )
    return e


async def deposit(
    s: AsyncSession, user_id: str, amount: int, key: str, initial: int
) -> LedgerEntry | None:
    """Credit `amount` once per `key` (a payment's id): None if that key was booked."""
    acc = await lock_account(s, user_id, initial)
    return await _entry(s, acc, "deposit", amount, key)


async def reserve(
    s: AsyncSession, acc: Account, order: GenerationOrder, grant: str
) -> LedgerEntry | None:
    return await _entry(
        s,
        acc,
        "reserve",
        order.price_cents,
        order.idempotency_key,
        order_id=order.id,
        task_id=order.task_id,
        grant=grant,
    )


async def _order_entry(s: AsyncSession, order: GenerationOrder, kind: str) -> LedgerEntry | None:
    """The order's ledger entry of `kind` (each kind is written once per order key)."""
    return await s.scalar(
        select(LedgerEntry).where(
            LedgerEntry.user_id == order.workspace_id,
            LedgerEntry.kind == kind,
            LedgerEntry.key == order.idempotency_key,
        )
    )


async def close_reservation(
    s: AsyncSession, order: GenerationOrder, initial: int
) -> LedgerEntry | None:
    """Settle a succeeded order, refund a failed one, settle a cancelled one's partial
    price and refund the rest; exactly once per order."""
    acc = await lock_account(s, order.workspace_id, initial)
    reserved = await _order_entry(s, order, "reserve")
    if reserved is None:
        return None  # nothing was reserved (an order from before money existed)
    closed = await s.scalar(
        select(func.count())
        .select_from(LedgerEntry)
        .where(
            LedgerEntry.user_id == order.workspace_id,
            LedgerEntry.kind.in_(("settle", "refund")),
            LedgerEntry.key == order.idempotency_key,
        )
    )
    if closed:
        return None
    if order.status == OrderStatus.CANCELLED:
        return await _close_cancelled(s, acc, order, reserved.amount_cents)
    kind = "settle" if order.status == OrderStatus.SUCCEEDED else "refund"
    return await _entry(
        s,
        acc,
        kind,
        reserved.amount_cents,
        order.idempotency_key,
        order_id=order.id,
        task_id=order.task_id,
    )


async def _close_cancelled(
    s: AsyncSession, acc: Account, order: GenerationOrder, reserved: int
) -> LedgerEntry | None:
    """A cancelled order settles the catalogue's partial price of the progress it reached
    (nothing before it started) and gives back the rest of its reservation; both entries
    in one transaction, so the order is closed whole or not at all."""
    charge = min(reserved, cancel_charge(order.price_cents, order.progress))
    first: LedgerEntry | None = None
    for kind, amount in (("settle", charge), ("refund", reserved - charge)):
        if amount > 0:
            e = await _entry(
                s,
                acc,
                kind,
                amount,
                order.idempotency_key,
                order_id=order.id,
                task_id=order.task_id,
            )
            first = first or e
    return first


async def reverse_settlement(
    s: AsyncSession, order: GenerationOrder, initial: int
) -> LedgerEntry | None:
    """Give back what a settled order was charged, exactly once: the upstream reported
    success but its result could not be used (over the size cap, or off its origin)."""
    acc = await lock_account(s, order.workspace_id, initial)
    settled = await _order_entry(s, order, "settle")
    if settled is None:
        return None  # not charged (a free order, or one refunded as failed)
    return await _entry(
        s,
        acc,
        "reverse",
        settled.amount_cents,
        order.idempotency_key,
        order_id=order.id,
        task_id=order.task_id,
    )


async def ledger_problems(s: AsyncSession, user_id: str) -> list[str]:
    """The invariant check every money test runs; an empty list means the books balance."""
    problems: list[str] = []
    acc = await s.get(Account, user_id, populate_existing=True)
    if acc is None:
        return problems
    sums = {
        k: int(v)
        for k, v in await s.execute(
            select(LedgerEntry.kind, func.coalesce(func.sum(LedgerEntry.amount_cents), 0))
            .where(LedgerEntry.user_id == user_id)
            .group_by(LedgerEntry.kind)
        )
    }
    dep, res = sums.get("deposit", 0), sums.get("reserve", 0)
    stl, ref = sums.get("settle", 0), sums.get("refund", 0)
    rev = sums.get("reverse", 0)
    if acc.balance_cents + acc.reserved_cents + acc.spent_cents != acc.deposits_cents:
        problems.append(f"balance+reserved+spent != deposits: {acc.__dict__}")
    if acc.deposits_cents != dep:
        problems.append(f"deposits {acc.deposits_cents} != entries {dep}")
    if acc.reserved_cents != res - stl - ref:
        problems.append(f"reserved {acc.reserved_cents} != {res} - {stl} - {ref}")
    if acc.spent_cents != stl - rev:
        problems.append(f"spent {acc.spent_cents} != settled {stl} - reversed {rev}")
    if min(acc.balance_cents, acc.reserved_cents, acc.spent_cents) < 0:
        problems.append(f"negative total: {acc.__dict__}")
    entries = list(await s.scalars(select(LedgerEntry).where(LedgerEntry.user_id == user_id)))
    by_key: dict[str, set[str]] = {}
    amounts: dict[tuple[str, str], int] = {}
    for e in entries:
        by_key.setdefault(e.key, set()).add(e.kind)
        amounts[e.key, e.kind] = e.amount_cents
    orders = list(
        await s.scalars(select(GenerationOrder).where(GenerationOrder.workspace_id == user_id))
    )
    # A cancelled order may settle a part and refund the rest; together, its reservation.
    cancelled = {o.idempotency_key for o in orders if o.status == OrderStatus.CANCELLED}
    for key, kinds in by_key.items():
        closed = amounts.get((key, "settle"), 0) + amounts.get((key, "refund"), 0)
        if {"settle", "refund"} <= kinds and key not in cancelled:
            problems.append(f"{key} both settled and refunded")
        if kinds & {"settle", "refund"} and closed != amounts.get((key, "reserve"), closed):
            problems.append(f"{key} closed for {closed}, not its reservation")
        if kinds & {"settle", "refund"} and "reserve" not in kinds:
            problems.append(f"{key} closed without a reservation")
        if "reverse" in kinds and "settle" not in kinds:
            problems.append(f"{key} reversed without a settlement")
    for o in orders:
        kinds = by_key.get(o.idempotency_key, set())
        if "reserve" not in kinds and o.price_cents:
            problems.append(f"order {o.id} without a reservation")
        if o.status == OrderStatus.SUCCEEDED and "settle" not in kinds:
            problems.append(f"order {o.id} succeeded but not settled")
        if o.status == OrderStatus.FAILED and "refund" not in kinds:
            problems.append(f"order {o.id} failed but not refunded")
        if o.status == OrderStatus.CANCELLED and o.price_cents and not kinds & {"settle", "refund"}:
            problems.append(f"order {o.id} cancelled but its reservation not closed")
        if o.status not in TERMINAL_ORDER and kinds & {"settle", "refund"}:
            problems.append(f"order {o.id} open but its reservation is closed")
    return problems

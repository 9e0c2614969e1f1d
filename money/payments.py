"""Top-ups: a payment at the provider, booked as a ledger deposit exactly once.

The provider reports a payment's state by a signed webhook (the api checks the signature).
`apply_report` books it in one transaction: the payment's state (only forward), the
`deposit` entry keyed `payment:<id>` (the ledger's unique key makes a duplicate, a replay or
a racing report a no-op), and the answer of every open `credit` card of the person, which
is what wakes the tasks parked for credit. Those answers are durable with the deposit: a
lost wake-up is sent again by the api's relay (`cards.handed_at`), and a parked task's card
timer re-reads its cards from the DB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from lomo import clock
from lomo.db.models import Card
from lomo.errors import InvalidInput, NotFound
from lomo.events import append_event
from lomo.ids import new_id
from lomo.settings import Settings
from lomo.states import (
    PAYMENT_RANK,
    TERMINAL_PAYMENT,
    CardAction,
    CardKind,
    CardStatus,
    EventType,
    PaymentStatus,
)
from money.ledger import deposit, lock_account
from money.models import Payment

CREDIT_ANSWER = {"action": CardAction.CONFIRM, "option_id": None, "text": "credit was added"}


def now() -> datetime:
    return clock.now()


def deposit_key(payment_id: str) -> str:
    return f"payment:{payment_id}"


def payment_view(p: Payment) -> dict[str, object]:
    return {
        "payment_id": p.id,
        "amount_cents": p.amount_cents,
        "currency": p.currency,
        "status": p.status,
        "checkout_url": p.checkout_url,
        "error": p.error,
        "created_at": clock.utc(p.created_at).isoformat(),
        "completed_at": clock.utc(p.completed_at).isoformat() if p.completed_at else None,
    }


async def open_payment(
    s: AsyncSession, user_id: str, amount: int, request_key: str | None, settings: Settings
) -> tuple[Payment, bool]:
    """The person's top-up, once per request key; (payment, created)."""
    if not settings.topup_min_cents <= amount <= settings.topup_max_cents:
        raise InvalidInput(
            f"a top-up is between {settings.topup_min_cents} and {settings.topup_max_cents} cents"
        )
    pid = new_id("pay")
    key = request_key or pid
    old = await s.scalar(
        select(Payment).where(Payment.user_id == user_id, Payment.request_key == key)
    )
    if old is not None:
        if old.amount_cents != amount:
            raise InvalidInput(f"request {key} was a top-up of {old.amount_cents} cents")
        return old, False
    p = Payment(
        id=pid,
        user_id=user_id,
        amount_cents=amount,
        currency="EUR",
        status=PaymentStatus.CREATED,
        request_key=key,
        updated_at=now(),
    )
    s.add(p)
    await s.flush()
    return p, True


async def own_payment(s: AsyncSession, user_id: str, payment_id: str) -> Payment:
    p = await s.get(Payment, payment_id)
    if p is None or p.user_id != user_id:
        raise NotFound(f"no top-up {payment_id}")
    return p


async def record_checkout(
    s: AsyncSession, payment_id: str, provider_id: str, checkout_url: str | None
) -> None:
    """The provider took the payment: keep its id; created → pending (never backwards: a
    webhook may have been faster than the provider's answer)."""
    await s.execute(
        update(Payment)
        .where(Payment.id == payment_id, Payment.provider_id.is_(None))
        .values(provider_id=provider_id, checkout_url=checkout_url, updated_at=now())
    )
    await s.execute(
        update(Payment)
        .where(Payment.id == payment_id, Payment.status == PaymentStatus.CREATED)
        .values(status=PaymentStatus.PENDING, updated_at=now())
    )


@dataclass
class Report:
    """A provider's report, after its signature was checked."""

    reference: str  # our payment id, which the payment was created with
    provider_id: str
    status: str
    amount_cents: int
    currency: str
    error: str | None = None


@dataclass
class Booked:
    changed: bool
    deposited: bool
    cards: list[Card] = field(default_factory=list)  # credit cards answered by the deposit


async def apply_report(s: AsyncSession, r: Report, settings: Settings) -> Booked:
    """Book a provider report; duplicates and late (lower) states change nothing."""
    if r.status not in PAYMENT_RANK:
        raise InvalidInput(f"unknown payment status {r.status!r}")
    p = await s.get(Payment, r.reference)
    if p is None or (p.provider_id is not None and p.provider_id != r.provider_id):
        raise NotFound(f"no payment {r.reference} for {r.provider_id}")
    if (p.amount_cents, p.currency) != (r.amount_cents, r.currency):
        raise InvalidInput("the report's amount is not the payment's")
    # Lock order as for orders: the payment row, then the account (money/ledger.py). The
    # conditional write locks the row on SQLite too, and the re-read is current.
    await s.execute(update(Payment).where(Payment.id == p.id).values(updated_at=now()))
    await s.refresh(p)
    await lock_account(s, p.user_id, settings.initial_credit_cents)
    if p.provider_id is None:
        p.provider_id = r.provider_id  # the report came before the provider's answer
    if p.status in TERMINAL_PAYMENT or PAYMENT_RANK[r.status] <= PAYMENT_RANK[p.status]:
        return Booked(changed=False, deposited=False)
    p.status, p.updated_at = r.status, now()
    if r.status == PaymentStatus.FAILED:
        p.error = (r.error or "the payment failed")[:200]
    booked = Booked(changed=True, deposited=False)
    if r.status == PaymentStatus.SUCCEEDED:
        p.completed_at = now()
        entry = await deposit(
            s, p.user_id, p.amount_cents, deposit_key(p.id), settings.initial_credit_cents
        )
        booked.deposited = entry is not None
        booked.cards = await answer_credit_cards(s, p.user_id)
    await append_event(s, p.user_id, EventType.BUDGET_CHANGED, {"payment": payment_view(p)})
    return booked


async def answer_credit_cards(s: AsyncSession, user_id: str) -> list[Card]:
    """Credit arrived: every open `credit` card of the person is answered, so its task runs
    the waiting call again (which reserves, or asks for more credit with a new card)."""
    cards = list(
        await s.scalars(
            select(Card)
            .where(
                Card.user_id == user_id,
                Card.kind == CardKind.CREDIT,
                Card.status == CardStatus.OPEN,
            )
            .order_by(Card.created_at)
        )
    )
    for card in cards:
        card.status, card.answer, card.answered_at = CardStatus.ANSWERED, dict(CREDIT_ANSWER), now()
        await append_event(
            s,
            user_id,
            EventType.CARD_ANSWERED,
            {"card_id": card.id, "task_id": card.task_id, **CREDIT_ANSWER},
        )
    await s.flush()
    return cards

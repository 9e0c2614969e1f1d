"""Orders: quote → authorize → reserve (one transaction), the monotonic job state machine,
and settlement in the order's terminal transition (shared by callback and poll).

Unclear submits: an order whose upstream submit started but has no job id recorded (a
timeout, a broken answer, or a worker killed between the POST and persisting the id).
- The upstream honours idempotency keys (`Settings.generation_upstream_idempotent`, the
  default; the simulator does): the submit is sent again with the same key (= call_id) by
  the call's next attempt (Temporal's retry) or by the compensating poll, and the job id
  the upstream answers is adopted. A key the upstream has seen creates no second job, so
  attempts racing (an old worker beside its successor) all get the one job; the order is
  charged once and nothing is refunded.
- It does not: the refund rule. The order is failed and fully refunded (at once on a
  timeout; once the submit timeout has passed after a crash) and never resubmitted
  automatically; if the upstream did create the job, the platform bears that cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from cards.store import create_card
from lomo import clock
from lomo.db.models import Card, GenerationOrder, Task
from lomo.events import append_event
from lomo.ids import new_id
from lomo.language import task_language
from lomo.settings import Settings
from lomo.states import (
    ORDER_RANK,
    TERMINAL_ORDER,
    CardAction,
    CardKind,
    CardStatus,
    EventType,
    OrderStatus,
)
from lomo.telemetry import ORDERS
from lomo.words import euros, say
from money.ledger import close_reservation, lock_account, reserve, reverse_settlement
from money.policy import authorize

# The refund rule's reason (an upstream without idempotency keys only).
UNCLEAR_SUBMIT = "upstream submit outcome unclear (no job id recorded); refunded, not resubmitted"
# A success whose result lives elsewhere fails as an upstream failure does (and refunds):
# following it would let a callback make the worker fetch any address it names.
OFF_ORIGIN = "result url is not on the generation upstream's origin; not fetched"
DEFAULT_PORTS = {"http": 80, "https": 443}


def now() -> datetime:
    return clock.now()


@dataclass
class Placed:
    order: GenerationOrder
    new: bool


@dataclass
class NeedsConfirmation:
    card: Card
    reason: str


@dataclass
class Refused:
    reason: str


@dataclass
class NeedsCredit:
    """Not enough balance: the call waits on a `credit` card, answered by a top-up's
    deposit (money/payments.py) or by the person (confirm: try again; reject: give up)."""

    card: Card
    reason: str


@dataclass
class OrderRequest:
    user_id: str
    task_id: str
    call_id: str
    kind: str
    model: str
    params: dict[str, Any]
    price_cents: int
    # A task's call parks on a `credit` card when the balance is short; a flow node is
    # refused instead (its run ends, and is started again by the person).
    waits_for_credit: bool = False


async def place_order(
    s: AsyncSession, req: OrderRequest, settings: Settings
) -> Placed | NeedsConfirmation | NeedsCredit | Refused:
    """Quote → authorize → reserve, under the account lock, in the caller's transaction.

    The lock makes racing calls on one budget serial (never overspent) and makes the same
    call_id from two workers find one order (charged once)."""
    acc = await lock_account(s, req.user_id, settings.initial_credit_cents)
    order = await s.scalar(
        select(GenerationOrder).where(
            GenerationOrder.workspace_id == req.user_id,
            GenerationOrder.idempotency_key == req.call_id,
        )
    )
    if order is not None:
        return Placed(order, new=False)
    card = await s.scalar(select(Card).where(Card.user_id == req.user_id, Card.key == req.call_id))
    if (
        card is not None
        and card.status == CardStatus.ANSWERED
        and (card.answer or {}).get("action") != CardAction.CONFIRM
    ):
        return Refused("the person declined this paid call; do not repeat it unasked")
    decision = await authorize(s, req.user_id, req.task_id, req.call_id, req.price_cents, settings)
    if decision.grant is None:
        lang = await task_language(s, req.task_id)
        amount = euros(req.price_cents, lang)
        card = await create_card(
            s,
            user_id=req.user_id,
            kind=CardKind.PRICE,
            title=say("money.price", lang, kind=req.kind, model=req.model, amount=amount),
            task_id=req.task_id,
            price_cents=req.price_cents,
            payload={
                "call_id": req.call_id,
                "kind": req.kind,
                "model": req.model,
                "reason": decision.reason,
            },
            key=req.call_id,
        )
        return NeedsConfirmation(card, decision.reason)
    if acc.balance_cents < req.price_cents:
        short = f"insufficient balance: {acc.balance_cents} cents left, {req.price_cents} needed"
        if not req.waits_for_credit:
            return Refused(short)
        return await _await_credit(s, req, acc.balance_cents, short)
    order = GenerationOrder(
        id=new_id("ord"),
        workspace_id=req.user_id,
        task_id=req.task_id,
        idempotency_key=req.call_id,
        kind=req.kind,
        model=req.model,
        params=req.params,
        price_cents=req.price_cents,
        status=OrderStatus.CREATED,
        progress=0.0,
        last_seq=-1,
    )
    s.add(order)
    await s.flush()
    ORDERS.labels(OrderStatus.CREATED).inc()
    await reserve(s, acc, order, decision.grant)  # checked above, under the same lock
    return Placed(order, new=True)


async def _await_credit(
    s: AsyncSession, req: OrderRequest, balance: int, short: str
) -> NeedsCredit | Refused:
    """The call's latest credit card: still open, it is waited on; declined, the call is
    refused; answered (credit came, or the person asked to try again) and still short, a
    new one is asked (the n-th card of a call has key `credit:<call_id>:<n>`)."""
    prefix = f"credit:{req.call_id}:"
    n = int(
        await s.scalar(
            select(func.count())
            .select_from(Card)
            .where(
                Card.user_id == req.user_id,
                Card.kind == CardKind.CREDIT,
                Card.key.startswith(prefix),
            )
        )
        or 0
    )
    last = await s.scalar(
        select(Card).where(Card.user_id == req.user_id, Card.key == f"{prefix}{n - 1}")
    )
    if last is not None and last.status == CardStatus.OPEN:
        return NeedsCredit(last, short)
    if last is not None and (last.answer or {}).get("action") == CardAction.REJECT:
        return Refused(f"{short}; the person chose not to add credit for this call")
    lang = await task_language(s, req.task_id)
    title = say(
        "money.credit",
        lang,
        kind=req.kind,
        model=req.model,
        amount=euros(req.price_cents, lang),
        balance=euros(balance, lang),
    )
    card = await create_card(
        s,
        user_id=req.user_id,
        kind=CardKind.CREDIT,
        title=title,
        task_id=req.task_id,
        price_cents=req.price_cents,
        payload={
            "call_id": req.call_id,
            "kind": req.kind,
            "model": req.model,
            "balance_cents": balance,
            "needed_cents": req.price_cents - balance,
            "reason": short,
        },
        key=f"{prefix}{n}",
    )
    return NeedsCredit(card, short)


async def claim_submit(s: AsyncSession, order_id: str, again: bool = False) -> bool:
    """Mark the one upstream submit of this order; False if one was already started.

    `again` (an upstream that honours idempotency keys): also True for a submit that
    started without a job id, which is then sent again with the same key; False only once
    the order needs no submit (its job id is stored, or it ended). Concurrent attempts may
    all get True: the key makes their POSTs one job. The first start time is kept."""
    r = await s.execute(
        update(GenerationOrder)
        .where(
            GenerationOrder.id == order_id,
            GenerationOrder.submit_started_at.is_(None),
            GenerationOrder.status == OrderStatus.CREATED,
        )
        .values(submit_started_at=now(), updated_at=now())
    )
    if r.rowcount or not again:  # type: ignore[attr-defined]
        return bool(r.rowcount)  # type: ignore[attr-defined]
    # A conditional write, not a read: it also write-locks the row on SQLite.
    r = await s.execute(
        update(GenerationOrder)
        .where(
            GenerationOrder.id == order_id,
            GenerationOrder.upstream_job_id.is_(None),
            GenerationOrder.status == OrderStatus.CREATED,
        )
        .values(updated_at=now())
    )
    return bool(r.rowcount)  # type: ignore[attr-defined]


async def release_submit(s: AsyncSession, order_id: str) -> None:
    """The POST never reached the upstream (connection refused): the claim is void."""
    await s.execute(
        update(GenerationOrder)
        .where(GenerationOrder.id == order_id, GenerationOrder.upstream_job_id.is_(None))
        .values(submit_started_at=None, updated_at=now())
    )


async def record_job_id(s: AsyncSession, order_id: str, job_id: str) -> None:
    """Conditional writes, not read-modify-write: an order failed meanwhile (an unclear
    submit resolved by a poll) stays failed; the id is kept for the audit."""
    await s.execute(
        update(GenerationOrder)
        .where(GenerationOrder.id == order_id, GenerationOrder.upstream_job_id.is_(None))
        .values(upstream_job_id=job_id, updated_at=now())
    )
    moved = await s.execute(
        update(GenerationOrder)
        .where(GenerationOrder.id == order_id, GenerationOrder.status == OrderStatus.CREATED)
        .values(status=OrderStatus.SUBMITTED, updated_at=now())
    )
    if getattr(moved, "rowcount", 0):
        ORDERS.labels(OrderStatus.SUBMITTED).inc()


def submit_unclear(order: GenerationOrder, settings: Settings) -> bool:
    """A submit started, no job id recorded, and its time is up (the refund rule's test;
    with an idempotent upstream such a submit is sent again instead)."""
    if order.upstream_job_id or order.submit_started_at is None:
        return False
    limit = timedelta(seconds=settings.generation_submit_timeout_seconds)
    return now() - clock.utc(order.submit_started_at) >= limit


async def fail_order(
    s: AsyncSession, order: GenerationOrder, reason: str, settings: Settings
) -> bool:
    changed, _ = await record_job_state(
        s, order, OrderStatus.FAILED, order.progress, None, {"error": reason}, settings
    )
    return changed


def job_deadline(kind: str, settings: Settings) -> timedelta:
    """How long the upstream may take over a job of `kind`, from its order (a kind the
    settings do not name gets the longest they allow)."""
    limits = settings.generation_deadline_seconds
    return timedelta(seconds=limits.get(kind, max(limits.values(), default=3600.0)))


async def fail_overdue(s: AsyncSession, order: GenerationOrder, settings: Settings) -> bool:
    """A job still not finished past its deadline is failed: the failed order's charge is
    given back (its reservation refunded) and the person told in the task, once. The
    workflow waiting on it then ends its wait instead of polling forever."""
    limit = job_deadline(order.kind, settings)
    if order.status in TERMINAL_ORDER or now() - clock.utc(order.created_at) < limit:
        return False
    lang = await task_language(s, order.task_id)
    minutes = max(1, round(limit.total_seconds() / 60))
    reason = say("generation.deadline_reason", lang, minutes=minutes)
    if not await fail_order(s, order, reason, settings):
        return False  # a report got there first
    amount = euros(order.price_cents, lang)
    key = "generation.deadline" if order.price_cents else "generation.deadline_free"
    name = " ".join(str(order.params.get("prompt") or "").split())[:60]
    turn = await s.scalar(select(Task.turn).where(Task.id == order.task_id))
    reply = {
        "task_id": order.task_id,
        "text": say(key, lang, name=name, minutes=minutes, amount=amount),
        "turn": int(turn or 0),
        "step": 0,  # the runtime's reply, not a model step's
        "by": "runtime",
    }
    await append_event(s, order.workspace_id, EventType.TASK_REPLY, reply)
    return True


async def refund_unusable(
    s: AsyncSession, order: GenerationOrder, reason: str, settings: Settings
) -> None:
    """A succeeded order whose result cannot be used (larger than the upload cap, or off
    the upstream's origin): it stays succeeded (the upstream says so, and terminal states
    are final), keeps the reason as its error, and the person is given the charge back,
    once. The platform bears the upstream's cost, as with an unclear submit."""
    order.error, order.updated_at = reason, now()
    await reverse_settlement(s, order, settings.initial_credit_cents)


def _origin(url: str) -> tuple[str, str, int] | None:
    try:
        u = httpx.URL(url)  # the parser that fetches it: no disagreement about the host
    except (httpx.InvalidURL, ValueError, TypeError):
        return None
    if u.scheme not in DEFAULT_PORTS or not u.host or u.userinfo:
        return None
    return u.scheme, u.host, u.port or DEFAULT_PORTS[u.scheme]


def on_upstream_origin(url: str | None, settings: Settings) -> bool:
    """Is `url` on the configured generation upstream's scheme, host and port?"""
    own = _origin(settings.resolved_sim_url)
    return bool(url) and own is not None and _origin(str(url)) == own


def apply_job_state(
    order: GenerationOrder,
    status: str,
    progress: float,
    seq: int | None,
    job: dict[str, Any],
) -> bool:
    """Monotonic job state machine; returns True if anything changed."""
    if order.status in TERMINAL_ORDER:
        return False  # terminal is final: duplicates and late events change nothing
    if seq is not None and seq <= order.last_seq:
        return False
    if ORDER_RANK.get(status, -1) < ORDER_RANK[order.status]:
        return False
    changed = status != order.status or progress > order.progress
    if status != order.status:
        ORDERS.labels(status).inc()
    order.status = status
    order.progress = max(order.progress, progress)
    if seq is not None:
        order.last_seq = seq
    if status == OrderStatus.SUCCEEDED:
        order.result_url = job.get("result_url")
        order.progress = 1.0
    if status == OrderStatus.FAILED:
        order.error = job.get("error") or "upstream failure"
    order.updated_at = now()
    return changed


async def record_job_state(
    session: AsyncSession,
    order: GenerationOrder,
    status: str,
    progress: float,
    seq: int | None,
    job: dict[str, Any],
    settings: Settings,
) -> tuple[bool, bool]:
    """Apply a job report (callback or poll) and emit its event; returns (changed, became
    terminal). The terminal transition settles (succeeded) or refunds (failed) the order's
    reservation in the same transaction, exactly once. The caller holds the order's lock."""
    # Write-lock the order row and re-read it: SELECT ... FOR UPDATE is a no-op on SQLite,
    # where a concurrent report could otherwise act on a stale state (a second completion,
    # or an older progress overwriting a newer one).
    await session.execute(
        update(GenerationOrder)
        .where(GenerationOrder.id == order.id)
        .values(updated_at=GenerationOrder.updated_at)
    )
    await session.refresh(order)
    if status == OrderStatus.SUCCEEDED and not on_upstream_origin(job.get("result_url"), settings):
        status, job = OrderStatus.FAILED, {"error": OFF_ORIGIN}
    was_terminal = order.status in TERMINAL_ORDER
    if was_terminal or status in TERMINAL_ORDER:
        # Lock order: account before the per-user event counter, as in place_order;
        # the other order deadlocks against a concurrent reservation on Postgres.
        await lock_account(session, order.workspace_id, settings.initial_credit_cents)
    changed = apply_job_state(order, status, progress, seq, job)
    now_terminal = order.status in TERMINAL_ORDER
    if changed:
        await append_event(
            session,
            order.workspace_id,
            EventType.GENERATION_COMPLETED if now_terminal else EventType.GENERATION_PROGRESS,
            {
                "task_id": order.task_id,
                "status": order.status,
                "progress": order.progress,
            },
        )
    if now_terminal:
        # Also for an order found terminal: closing is idempotent, and it heals a crash
        # between the state change and the booking (they share one transaction anyway).
        await close_reservation(session, order, settings.initial_credit_cents)
    return changed, now_terminal and not was_terminal

"""Paid generation: the generation tools, polling and collection.

An order per paid call, unique on (workspace, idempotency_key = call_id). Money and the job
state machine live in money/orders.py; the callback route and the compensating poll
share `record_job_state`, so a lost callback and a delivered one end the same way, and the
order settles or refunds exactly once in its terminal transition.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from datetime import datetime
from typing import Any

import httpx
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from cards.store import confirmed, create_card
from llm.types import ToolSpec
from lomo import clock
from lomo.db.engine import Database
from lomo.db.models import Card, GenerationOrder
from lomo.errors import InvalidInput, NotFound
from lomo.language import task_language
from lomo.settings import Settings
from lomo.states import CardKind, CardStatus, OrderStatus
from lomo.words import euros, say
from money.catalogue import CATALOGUE, ModelSpec, validate_request
from money.orders import (
    UNCLEAR_SUBMIT,
    NeedsConfirmation,
    NeedsCredit,
    OrderRequest,
    Refused,
    claim_submit,
    fail_order,
    place_order,
    record_job_id,
    release_submit,
    submit_unclear,
)
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult, error
from workspace.store import get_object

log = logging.getLogger(__name__)
# How long an attempt keeps trying to store a job id the upstream returned (a Postgres
# crash and restart takes seconds; the tool activity's start-to-close is 2 minutes).
PERSIST_JOB_ID_SECONDS = 90.0
MEDIA = {
    "image": "image/png",
    "video": "video/mp4",
    "audio": "audio/wav",
    "3d": "model/gltf-binary",
}


def now() -> datetime:
    return clock.now()


_EXTRA_PROPS: dict[str, dict[str, Any]] = {
    "image": {
        "width": {"type": "integer"},
        "height": {"type": "integer"},
        "reference_object_id": {"type": "string"},
    },
    "video": {"duration_s": {"type": "number"}, "reference_object_id": {"type": "string"}},
    "audio": {"duration_s": {"type": "number"}},
    "3d": {"reference_object_id": {"type": "string"}},
}
_WHAT = {
    "image": "one image",
    "video": "a short video, optionally animating a reference image asset",
    "audio": "a short audio clip",
    "3d": "one 3D model, optionally from a reference image asset",
}


# The plan's word on the result (docs/architecture.md#waking-the-model): not sent upstream.
PRESENT_WHEN_DONE = "present_when_done"
_PRESENT = {
    "type": "boolean",
    "description": "true when the finished result is itself the answer (one picture, clip "
    "or model asked for, nothing to decide once it is there): the platform shows it to the "
    "person when the job succeeds and does not ask you again. A failed job, or a message "
    "from the person meanwhile, still comes back to you. Leave it out when the result "
    "feeds a next step, a selection or a review.",
}


def _spec(kind: str) -> ToolSpec:
    """The model sees the catalogue in the tool itself: models, constraints, prices, so it
    cannot plan a step the platform cannot do and knows what a call costs."""
    models = [m for m in CATALOGUE.values() if m.kind == kind]
    return ToolSpec(
        name=f"generate_{kind}",
        description=f"Generate {_WHAT[kind]} (paid). Returns an order; the result arrives "
        "later. Over the person's thresholds it returns needs_confirmation and waits for "
        "their answer; without enough balance the task waits until credit is added. "
        "Models: " + " | ".join(m.describe() for m in models),
        input_schema={
            "type": "object",
            "properties": {
                "prompt": {"type": "string"},
                "model": {"type": "string", "enum": [m.name for m in models]},
                **_EXTRA_PROPS[kind],
                PRESENT_WHEN_DONE: _PRESENT,
            },
            "required": ["prompt"],
        },
    )


GENERATION_SPECS = {kind: _spec(kind) for kind in _WHAT}


class GenerateTool(Tool):
    """One paid generation per call, idempotent on the call's `call_id`.

    quote (catalogue) → authorize + reserve (`place_order`, one transaction) or a `price`
    card → claim the one submit → POST upstream with idempotency_key=call_id → persist the
    job id at once. An unclear submit (timeout, broken answer, a worker killed before the
    id was stored) is sent again with the same key by the call's next attempt when the
    upstream honours idempotency keys; otherwise it fails the order and refunds it, never
    resubmitted (see money/orders.py)."""

    idempotent = True

    def __init__(self, deps: ToolDeps, kind: str) -> None:
        self.deps = deps
        self.kind = kind
        self.spec = GENERATION_SPECS[kind]
        self.domain = kind  # image | video | audio | 3d: loaded on demand

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        # The runtime's flag, read from the journaled call (activities/runtime.py): neither
        # a parameter of the job nor part of the order.
        args.pop(PRESENT_WHEN_DONE, None)
        try:
            spec = await self._check(ctx, args)
        except (InvalidInput, NotFound) as e:
            # The model asked for something impossible: it hears why, nothing is spent.
            return error(e.detail)
        req = OrderRequest(
            ctx.user_id,
            ctx.task_id,
            ctx.call_id,
            self.kind,
            spec.name,
            args,
            spec.price_cents,
            waits_for_credit=True,
        )
        async with self.deps.db.session() as s:
            placed = await place_order(s, req, self.deps.settings)
            if isinstance(placed, Refused):
                return error(placed.reason)
            if isinstance(placed, NeedsConfirmation):
                return ToolResult(
                    "needs_confirmation",
                    {
                        "status": "needs_confirmation",
                        "price_cents": spec.price_cents,
                        "reason": placed.reason,
                        "detail": "waiting for the person to confirm the price card",
                    },
                    card_id=placed.card.id,
                )
            if isinstance(placed, NeedsCredit):
                # Not an answer for the model: the task waits for credit, then runs the
                # same call again (workflows/task.py).
                return ToolResult(
                    "needs_credit",
                    {
                        "status": "needs_credit",
                        "price_cents": spec.price_cents,
                        "reason": placed.reason,
                        "detail": "waiting for the person to add credit",
                    },
                    card_id=placed.card.id,
                )
            order_id = placed.order.id
        return await self._submit(order_id)

    async def _check(self, ctx: ToolCallContext, args: dict[str, Any]) -> ModelSpec:
        spec = validate_request(self.kind, args)
        ref = args.get("reference_object_id")
        if ref:
            async with self.deps.db.session() as s:
                obj = await get_object(s, ctx.user_id, str(ref))
                if obj.type != "asset" or obj.deleted:
                    raise InvalidInput(f"{ref} is not an asset that can be used as reference")
        return spec

    async def _submit(self, order_id: str) -> ToolResult:
        settings = self.deps.settings
        # An upstream that honours idempotency keys makes a submit that started without a
        # job id safe to send again: the same key answers the same job, also to two
        # attempts at once (an old worker still running beside its successor).
        resend = settings.generation_upstream_idempotent
        async with self.deps.db.session() as s:
            order = await s.get(GenerationOrder, order_id, with_for_update=True)
            assert order is not None
            if order.status in (OrderStatus.FAILED, OrderStatus.CANCELLED):
                reason = order.error or f"generation {order.status}"
                return error(reason, failed_order=order.id)
            if order.upstream_job_id or order.status == OrderStatus.SUCCEEDED:
                return _submitted(order.id)
            if order.submit_started_at is not None and not resend:
                if submit_unclear(order, settings):
                    await fail_order(s, order, UNCLEAR_SUBMIT, settings)
                    return error(UNCLEAR_SUBMIT, failed_order=order.id)
                return _submitted(order.id)  # another attempt is submitting; polls resolve it
            if not await claim_submit(s, order_id, again=resend):
                return _submitted(order.id)
            body = job_request(order, settings, await reference_url(s, order))
        try:
            r = await post_job(self.deps, body)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            # Nothing reached the upstream: release the claim; Temporal retries the call.
            # (Not after a resend: an earlier attempt's POST may have reached it.)
            if not resend:
                async with self.deps.db.session() as s:
                    await release_submit(s, order_id)
            raise
        except httpx.HTTPError as e:
            log.warning("submit of %s unclear: %r", order_id, e)
            if not resend:
                return await self.fail(order_id, UNCLEAR_SUBMIT)
            # The job the key made is looked up and re-attached (charged once); none yet:
            # Temporal retries the call, and its next attempt sends the key again.
            if await adopt_job(self.deps, order_id, str(body["idempotency_key"])) is None:
                raise
            return _submitted(order_id)
        if settings.fault_kill_after_submit:
            os._exit(137)  # TEST-ONLY (LOMO_FAULT_KILL_AFTER_SUBMIT): die before persisting
        if r.status_code >= 400:
            return await self.fail(order_id, refused(r))
        job_id = await keep_job_id(self.deps.db, order_id, r)
        await cancel_if_cancelled(self.deps, order_id, job_id)
        return _submitted(order_id)

    async def fail(self, order_id: str, reason: str) -> ToolResult:
        await fail(self.deps, order_id, reason)
        return error(reason, failed_order=order_id)


async def reference_url(s: AsyncSession, order: GenerationOrder) -> str | None:
    """Where the upstream made the reference picture, when an earlier job of this person
    made it: a revision then starts from that picture, not only from the words."""
    ref = order.params.get("reference_object_id")
    if not ref:
        return None
    q = select(GenerationOrder.result_url).where(
        GenerationOrder.object_id == str(ref),
        GenerationOrder.workspace_id == order.workspace_id,
    )
    return await s.scalar(q.limit(1))


def job_request(
    order: GenerationOrder, settings: Settings, reference_url: str | None = None
) -> dict[str, Any]:
    params = {**order.params, "reference_url": reference_url} if reference_url else order.params
    return {
        "kind": order.kind,
        "model": order.model,
        "params": params,
        "callback_url": f"{settings.resolved_api_url}/v1/generation/callbacks",
        "idempotency_key": order.idempotency_key,
    }


async def post_job(deps: ToolDeps, body: dict[str, Any]) -> httpx.Response:
    settings = deps.settings
    return await deps.http.post(
        f"{settings.resolved_sim_url}/jobs",
        json=body,
        timeout=settings.generation_submit_timeout_seconds,
    )


def _account(settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {settings.sim_token.get_secret_value()}"}


async def cancel_job(deps: ToolDeps, job_id: str) -> dict[str, Any] | None:
    """Ask the upstream to stop a job; its answer is the job's state after it (cancelled,
    or how it had ended already). None: the upstream knows no such job."""
    settings = deps.settings
    r = await deps.http.post(
        f"{settings.resolved_sim_url}/jobs/{job_id}/cancel", headers=_account(settings)
    )
    if r.status_code == 404:
        return None
    r.raise_for_status()
    return dict(r.json())


async def find_job(deps: ToolDeps, key: str) -> dict[str, Any] | None:
    """The job the upstream made for this idempotency key, if any: a submit whose answer
    was lost is found again here, not sent a second time."""
    settings = deps.settings
    r = await deps.http.get(
        f"{settings.resolved_sim_url}/jobs",
        params={"idempotency_key": key},
        headers=_account(settings),
    )
    r.raise_for_status()
    jobs = r.json().get("jobs") or []
    return dict(jobs[0]) if jobs else None


def refused(r: httpx.Response) -> str:
    return f"upstream refused the job: HTTP {r.status_code}"


async def fail(deps: ToolDeps, order_id: str, reason: str) -> str:
    async with deps.db.session() as s:
        order = await s.get(GenerationOrder, order_id, with_for_update=True)
        assert order is not None
        await fail_order(s, order, reason, deps.settings)
        return order.status


async def keep_job_id(db: Database, order_id: str, r: httpx.Response) -> str:
    """Store the job id of the upstream's answer. A broken answer (no job id) raises, so
    Temporal retries: an unclear submit like a timeout."""
    job_id = str(r.json()["job_id"])
    # Shielded: an attempt cancelled now (its heartbeat timed out while the dev server
    # restarted) still stores the id it holds; the conditional writes keep a failed
    # order failed.
    await asyncio.shield(asyncio.ensure_future(_persist_job_id(db, order_id, job_id)))
    return job_id


async def _persist_job_id(db: Database, order_id: str, job_id: str) -> None:
    """Persist the job id at once, riding out a DB outage (Postgres restarting).

    Once the POST returned, the job id lives only in this attempt's memory: raising here
    would make the order an unclear submit, failed and refunded while the vendor makes the
    job (a result never collected). The attempt heartbeats meanwhile; only an outage longer
    than PERSIST_JOB_ID_SECONDS falls back to the refund rule."""
    deadline = time.monotonic() + PERSIST_JOB_ID_SECONDS
    delay = 0.2
    while True:
        try:
            async with db.session() as s:
                await record_job_id(s, order_id, job_id)
            return
        except IntegrityError:
            raise
        except (DBAPIError, OSError) as e:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("job id %s of %s not stored yet, retrying: %r", job_id, order_id, e)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)  # land soon after the DB is back


async def adopt_job(deps: ToolDeps, order_id: str, key: str) -> str | None:
    """Re-attach the upstream job made for this key to its order (its id was never
    stored); None when the upstream has none, or cannot be asked now."""
    try:
        job = await find_job(deps, key)
    except httpx.HTTPError as e:
        log.warning("lookup of %s by its key failed: %r", order_id, e)
        return None
    if job is None:
        return None
    job_id = str(job["job_id"])
    await asyncio.shield(asyncio.ensure_future(_persist_job_id(deps.db, order_id, job_id)))
    await cancel_if_cancelled(deps, order_id, job_id)
    return job_id


async def cancel_if_cancelled(deps: ToolDeps, order_id: str, job_id: str) -> None:
    """A job whose id arrived after its order was cancelled (the submit's answer came
    late) is stopped too: nobody wants its result."""
    async with deps.db.session() as s:
        status = await s.scalar(
            select(GenerationOrder.status).where(GenerationOrder.id == order_id)
        )
    if status == OrderStatus.CANCELLED:
        await cancel_job(deps, job_id)


async def submit_order(deps: ToolDeps, order_id: str) -> ToolResult:
    """The one upstream submit of an order already placed (a flow node's, too)."""
    return await GenerateTool(deps, "image")._submit(order_id)  # _submit ignores the kind


def _submitted(order_id: str) -> ToolResult:
    return ToolResult(
        "done", {"status": "submitted", "order_id": order_id}, order_id=order_id, made_progress=True
    )


class RequestBudgetTool(Tool):
    """Ask the person for a plan budget for this task (a `price` card with a plan payload).
    Only the person's confirmation of that card creates the budget."""

    idempotent = True
    domain = "budget"

    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps
        self.spec = ToolSpec(
            name="request_budget",
            description="Ask the person to approve a total budget (cents, EUR) for this "
            "task's plan; paid steps within it then run without further questions.",
            input_schema={
                "type": "object",
                "properties": {
                    "amount_cents": {"type": "integer"},
                    "purpose": {"type": "string"},
                },
                "required": ["amount_cents", "purpose"],
            },
        )

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        try:
            amount = int(args["amount_cents"])
            purpose = str(args.get("purpose") or "")[:500]
        except (KeyError, TypeError, ValueError):
            return error("amount_cents must be an integer")
        if amount <= 0:
            return error("amount_cents must be positive")
        async with self.deps.db.session() as s:
            old = await s.scalar(
                select(Card).where(Card.user_id == ctx.user_id, Card.key == ctx.call_id)
            )
            if old is not None and old.status == CardStatus.ANSWERED:
                if confirmed(old):
                    return ToolResult(
                        "done", {"status": "approved", "amount_cents": old.price_cents}
                    )
                return error("the person declined this budget; do not spend without asking")
            lang = await task_language(s, ctx.task_id)
            title = say("money.budget", lang, amount=euros(amount, lang), purpose=purpose)
            card = await create_card(
                s,
                user_id=ctx.user_id,
                kind=CardKind.PRICE,
                title=title,
                task_id=ctx.task_id,
                price_cents=amount,
                payload={"plan": True, "purpose": purpose, "call_id": ctx.call_id},
                key=ctx.call_id,
            )
        return ToolResult(
            "needs_confirmation",
            {"status": "needs_confirmation", "amount_cents": amount},
            card_id=card.id,
        )


def generation_tools(deps: ToolDeps) -> list[Tool]:
    return [*(GenerateTool(deps, kind) for kind in GENERATION_SPECS), RequestBudgetTool(deps)]

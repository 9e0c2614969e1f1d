"""Generation activities: poll a job, collect its result (the tools are `tools/generation.py`)."""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

from sqlalchemy.ext.asyncio import AsyncSession
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.present import work_name
from activities.types import (
    OrderRef,
    OrderState,
    ReviewInput,
    ReviewOutcome,
    SupersedeInput,
    SupersedeOutcome,
)
from journal.supersede import superseded_orders
from lomo.db.models import GenerationOrder
from lomo.errors import NotFound
from lomo.events import append_event
from lomo.heartbeat import heartbeating
from lomo.states import TERMINAL_ORDER, EventType, OrderStatus
from money.orders import (
    OFF_ORIGIN,
    UNCLEAR_SUBMIT,
    claim_submit,
    fail_order,
    fail_overdue,
    on_upstream_origin,
    record_job_state,
    refund_unusable,
    submit_unclear,
)
from standin.intents import recognise
from tools.base import ToolDeps
from tools.generation import (
    MEDIA,
    adopt_job,
    cancel_job,
    fail,
    job_request,
    keep_job_id,
    now,
    post_job,
    reference_url,
    refused,
)
from workspace.errors import NotAPicture
from workspace.picture import PictureProps, matches, read
from workspace.store import create_asset, get_version

# What kind of thing a result is, first in its name (a model reading "recent asset …:
# image: …" in its context knows what it may use as a reference).
_KIND_NAMES = {"image": "image", "video": "video", "audio": "audio clip", "3d": "3D model"}


def asset_name(kind: str, params: dict[str, Any]) -> str:
    """A result is named by its kind and what was asked for (its prompt, without ids),
    never by an id: "3D model: a red fox"."""
    noun = _KIND_NAMES.get(kind, kind)
    title = work_name(str(params.get("prompt") or ""))
    return f"{noun}: {title}" if title else noun


class GenerationActivities:
    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps

    @activity.defn(name="poll_generation")
    async def poll_generation(self, ref: OrderRef) -> OrderState:
        # The poll may POST a submit again and waits on the upstream: a worker that dies
        # meanwhile loses its lease after the heartbeat timeout, not the whole timeout.
        async with heartbeating():
            return await self._poll(ref)

    async def _poll(self, ref: OrderRef) -> OrderState:
        settings = self.deps.settings
        async with self.deps.db.session() as s:
            order = await _order(s, ref.order_id, lock=True)
            job_id, key = order.upstream_job_id, order.idempotency_key
            body: dict[str, Any] | None = None
            if job_id is None:
                # No job id: a submit still in flight, or an unclear one.
                if not settings.generation_upstream_idempotent:
                    # The refund rule: failed + refunded once its time is up, never resent.
                    if submit_unclear(order, settings) or order.submit_started_at is None:
                        await fail_order(s, order, UNCLEAR_SUBMIT, settings)
                    return OrderState(order.id, order.status)
                if order.status in TERMINAL_ORDER:
                    return OrderState(order.id, order.status)
        if job_id is None:
            # An upstream that knows keys is asked which job this key made: found, it is
            # re-attached (charged once) without a second POST.
            job_id = await adopt_job(self.deps, ref.order_id, key)
        if job_id is None:
            async with self.deps.db.session() as s:
                order = await _order(s, ref.order_id, lock=True)
                # None yet: sent again with the same key; a POST the upstream has seen
                # answers that key's job (racing the submit in flight is harmless).
                if not await claim_submit(s, order.id, again=True):
                    return OrderState(order.id, order.status)
                body = job_request(order, settings, await reference_url(s, order))
        if body is not None:
            posted = await post_job(self.deps, body)  # unclear again: Temporal retries
            if posted.status_code >= 400:
                status = await fail(self.deps, ref.order_id, refused(posted))
                return OrderState(ref.order_id, status)
            job_id = await keep_job_id(self.deps.db, ref.order_id, posted)
        r = await self.deps.http.get(f"{settings.resolved_sim_url}/jobs/{job_id}")
        r.raise_for_status()
        job = r.json()
        async with self.deps.db.session() as s:
            order = await _order(s, ref.order_id, lock=True)
            await record_job_state(
                s, order, job["status"], float(job.get("progress", 0)), None, job, settings
            )
            await fail_overdue(s, order, settings)  # the upstream may never finish it
            return OrderState(order.id, order.status)

    @activity.defn(name="cancel_generation")
    async def cancel_generation(self, ref: OrderRef) -> OrderState:
        """Stop an order's upstream job nobody wants any more, and end the order in the
        state the upstream answers: cancelled (charged the catalogue's partial price of
        the progress reached, nothing before it started), or how it had ended already.
        Idempotent on the order: the upstream's cancel answers the same again, and
        `record_job_state` closes an order once, whichever of this answer and the job's
        callbacks comes first."""
        async with heartbeating():  # the upstream may be slow to answer
            return await self._cancel(ref)

    async def _cancel(self, ref: OrderRef) -> OrderState:
        async with self.deps.db.session() as s:
            order = await _order(s, ref.order_id)
            if order.status in TERMINAL_ORDER:
                return OrderState(order.id, order.status, order.object_id)
            job_id, key = order.upstream_job_id, order.idempotency_key
        if job_id is None:
            # The submit's answer was lost: the job its key made is found and stopped.
            job_id = await adopt_job(self.deps, ref.order_id, key)
        job = await cancel_job(self.deps, job_id) if job_id else None
        async with self.deps.db.session() as s:
            order = await _order(s, ref.order_id, lock=True)
            if job is None:
                # Nothing upstream (never submitted, or not yet): cancelled before it
                # started. `claim_submit` sends no submit for it now; an answer arriving
                # late is cancelled upstream too (`cancel_if_cancelled`).
                job = {"status": OrderStatus.CANCELLED, "progress": 0.0}
            await record_job_state(
                s,
                order,
                str(job["status"]),
                float(job.get("progress") or 0),
                None,
                job,
                self.deps.settings,
            )
            return OrderState(order.id, order.status, order.object_id)

    @activity.defn(name="superseded_orders")
    async def superseded_orders(self, inp: SupersedeInput) -> SupersedeOutcome:
        """The running orders that messages which reached the task while it waited take
        the request away from: a move of the message they were made for, or the person's
        change of the request (journal/supersede.py)."""
        if not inp.task_id or not inp.user_id:
            raise ApplicationError(
                "task and person are required", type="InvalidInput", non_retryable=True
            )
        got = await superseded_orders(
            self.deps.db, inp.user_id, inp.task_id, inp.message_ids, _changes_request
        )
        return SupersedeOutcome(got.order_ids, got.cause)

    @activity.defn(name="collect_generation")
    async def collect_generation(self, ref: OrderRef) -> OrderState:
        """Turn a finished job into a workspace asset, once (idempotent on the order).
        The download can be long: the attempt heartbeats, so a dead worker's collection is
        taken over after the heartbeat timeout."""
        async with heartbeating():
            return await self._collect(ref)

    async def _collect(self, ref: OrderRef) -> OrderState:
        async with self.deps.db.session() as s:
            order = await _order(s, ref.order_id)
            if order.object_id or order.status != OrderStatus.SUCCEEDED:
                return OrderState(order.id, order.status, order.object_id)
            url, kind = order.result_url, order.kind
        if not on_upstream_origin(url, self.deps.settings):
            # Recorded successes are checked already; an older row is not followed either.
            await self._refuse(ref.order_id, OFF_ORIGIN)
        assert url is not None
        if self.deps.settings.fault_hang_in_collect:
            await asyncio.sleep(3600)  # TEST-ONLY (LOMO_FAULT_HANG_IN_COLLECT): a test kills us
        data = await self._download(ref.order_id, url)
        async with self.deps.db.session() as s:
            order = await _order(s, ref.order_id, lock=True)
            if order.object_id:
                return OrderState(order.id, order.status, order.object_id)
            obj = await create_asset(
                s,
                self.deps.assets,
                order.workspace_id,
                name=asset_name(kind, order.params),
                data=data,
                # The job's kind says what it made; the response's Content-Type is the
                # upstream's word and could make the asset render as something else.
                media_type=MEDIA.get(kind, "application/octet-stream"),
                created_by=f"task:{order.task_id}:{order.idempotency_key}",
                provenance={
                    "task_id": order.task_id,
                    "call_id": order.idempotency_key,
                    "order_id": order.id,
                },
                task_id=order.task_id,
            )
            order.object_id, order.updated_at = obj.id, now()
            await append_event(
                s,
                order.workspace_id,
                EventType.OBJECT_VERSION,
                {"object_id": obj.id, "version": 1, "task_id": order.task_id},
            )
            return OrderState(order.id, order.status, obj.id)

    @activity.defn(name="review_results")
    async def review_results(self, inp: ReviewInput) -> ReviewOutcome:
        """Do the pictures meet their briefs? Each result is measured (colours, warmth,
        brightness, size) against its prompt's words, and against the picture it revised
        when it names one. Read-only: the same bytes give the same verdict on a retry."""
        misses: dict[str, list[str]] = {}
        async with heartbeating():  # decoding several large pictures takes a while
            for order_id in inp.order_ids:
                off = await self._review(inp.task_id, order_id)
                if off:
                    misses[order_id] = off
        return ReviewOutcome(misses)

    async def _review(self, task_id: str, order_id: str) -> list[str]:
        async with self.deps.db.session() as s:
            order = await s.get(GenerationOrder, order_id)
            if order is None or order.task_id != task_id or order.kind != "image":
                return []
            after = await self._picture(s, order.workspace_id, order.object_id)
            before = await self._picture(
                s, order.workspace_id, order.params.get("reference_object_id")
            )
        if after is None:
            return []
        verdict = matches(str(order.params.get("prompt", "")), after, before)
        return list(verdict.off)

    async def _picture(
        self, s: AsyncSession, user_id: str, object_id: object
    ) -> PictureProps | None:
        if not object_id:
            return None
        try:
            _, ver = await get_version(s, user_id, str(object_id))
            if not ver.blob_path:
                return None
            data = await self.deps.assets.get(ver.blob_path)
            return await asyncio.to_thread(read, data)
        except (NotFound, NotAPicture):
            return None

    async def _download(self, order_id: str, url: str) -> bytes:
        """The result's bytes, streamed and counted: past the upload cap it is dropped
        before it is held whole (a declared Content-Length over it is not even read)."""
        cap = self.deps.settings.max_upload_bytes
        too_big = f"result is larger than the {cap}-byte upload limit; not stored"
        async with self.deps.http.stream("GET", url) as r:
            r.raise_for_status()
            declared = r.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > cap:
                await self._refuse(order_id, too_big)
            chunks: list[bytes] = []
            size = 0
            async for chunk in r.aiter_bytes():
                size += len(chunk)
                if size > cap:
                    await self._refuse(order_id, too_big)
                chunks.append(chunk)
        return b"".join(chunks)

    async def _refuse(self, order_id: str, reason: str) -> NoReturn:
        """Collection refused for good: the reason is kept on the order, its charge is
        given back (the person got nothing), and the activity is not retried."""
        async with self.deps.db.session() as s:
            order = await s.get(GenerationOrder, order_id, with_for_update=True)
            assert order is not None
            await refund_unusable(s, order, reason, self.deps.settings)
        raise ApplicationError(
            f"order {order_id}: {reason}", type="CollectionRefused", non_retryable=True
        )

    def all(self) -> list[Any]:
        return [
            self.poll_generation,
            self.cancel_generation,
            self.superseded_orders,
            self.collect_generation,
            self.review_results,
        ]


async def _changes_request(text: str) -> bool:
    """Whether the person's words change what is being made: the recogniser's `change`
    intent (by meaning, in any language it knows), off the event loop."""
    if not text.strip():
        return False
    rec = await asyncio.to_thread(recognise, text)
    return rec.intent == "change"


async def _order(s: AsyncSession, order_id: str, lock: bool = False) -> GenerationOrder:
    """The order an activity works on; an unknown id is a caller's error, not retried."""
    order = await s.get(GenerationOrder, order_id, with_for_update=lock)
    if order is None:
        raise ApplicationError(f"no order {order_id}", type="NotFound", non_retryable=True)
    return order

"""What the main thread is told to do (`RoutePlan`), and its record: a plan is stored with
the message's routing in one transaction, so a retry of the same activity reads it back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import MessageRow, Task
from lomo.events import append_event
from lomo.settings import Settings
from lomo.states import RoutingStatus
from lomo.telemetry import MESSAGES_ROUTED
from routing.errors import Unroutable
from routing.models import RoutingRecord
from routing.types import MOVE, RoutePlan

_BY = "_routed_by"


class Moved(Protocol):
    """A message moved to another task: its copy there, and what the task it left hears."""

    copy: MessageRow

    def left(self) -> tuple[str | None, str | None, str | None]: ...


# Moves the person's message before `msg` to `task` (None: nothing to move).
Mover = Callable[[AsyncSession, MessageRow, Task], Awaitable[Moved | None]]


@dataclass(frozen=True)
class RouteContext:
    settings: Settings
    clock: Callable[[], datetime]
    # Which activity routes: one activity's attempts share it, a second one does not.
    origin: str = ""
    mover: Mover | None = None

    def plan(
        self, decision: str, message_id: str, task_id: str | None = None, kind: str | None = None
    ) -> RoutePlan:
        st = self.settings
        return RoutePlan(
            decision,
            task_id,
            kind,
            max_steps_per_turn=st.max_steps_per_turn,
            generation_wait_seconds=st.generation_wait_seconds,
            max_turns_without_progress=st.max_turns_without_progress,
            card_wait_seconds=st.card_wait_seconds,
            heartbeat_timeout_seconds=st.heartbeat_timeout_seconds,
            generation_wait_max_seconds=st.generation_wait_max_seconds,
            card_wait_max_seconds=st.card_wait_max_seconds,
            running_visible_seconds=st.running_visible_seconds,
            message_id=message_id,
        )

    def taken_back(self, msg: MessageRow) -> RoutePlan:
        """The person withdrew the message, or moved it elsewhere, before it was routed:
        nothing is handed over (a plan flagged as a repeat)."""
        plan = self.plan("answer", msg.id)
        plan.repeat = True
        return plan


def taken_back(msg: MessageRow) -> bool:
    return msg.withdrawn_at is not None or msg.moved_to is not None


async def message(s: AsyncSession, user_id: str, message_id: str) -> MessageRow:
    msg = await s.get(MessageRow, message_id)
    if msg is None or msg.user_id != user_id:
        raise Unroutable("NoMessage", f"no message {message_id}")
    return msg


async def recorded(s: AsyncSession, ctx: RouteContext, key: str) -> RoutePlan | None:
    """The plan stored for this item. Returned as is to a retry of the activity that
    stored it (its workflow has not handed it over yet); to any other activity, flagged
    as a repeat: the item was handed to the main thread twice (an api retry)."""
    rec = await s.get(RoutingRecord, key)
    if rec is None:
        return None
    fields = dict(rec.plan)
    by = fields.pop(_BY, None)
    plan = RoutePlan(**fields)
    plan.repeat = by is not None and by != ctx.origin
    return plan


async def record(
    s: AsyncSession,
    ctx: RouteContext,
    msg: MessageRow,
    plan: RoutePlan,
    shown: list[str],
    calls: int,
    key: str | None = None,
) -> RoutePlan:
    """Store the plan with the message's routing in one transaction (a retry reads it)."""
    msg.routing_status, msg.decision = RoutingStatus.ROUTED, plan.decision
    # A move hands over the moved message's copy: these words belong to no task.
    msg.task_id = plan.task_id if plan.decision not in ("clarify", MOVE) else None
    s.add(
        RoutingRecord(
            key=key or msg.id,
            user_id=msg.user_id,
            message_id=msg.id,
            plan={**_plan_dict(plan), _BY: ctx.origin},
            candidates=shown,
            model_calls=calls,
        )
    )
    await append_event(
        s,
        msg.user_id,
        "message.routed",
        {"message_id": msg.id, "decision": plan.decision, "task_id": plan.task_id},
    )
    MESSAGES_ROUTED.labels(plan.decision).inc()
    return plan


def _plan_dict(plan: RoutePlan) -> dict[str, Any]:
    return asdict(plan)

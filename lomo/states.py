"""The platform's named states, defined once: every status, kind and event type a row, an
event or a workflow carries.

`StrEnum` members compare and serialise as their strings, so the wire format, the
database columns and recorded workflow histories stay exactly as they were; code that
names a state uses the member, and the sets below are the only copies of each grouping.
"""

from __future__ import annotations

from enum import StrEnum


class TaskStatus(StrEnum):
    RUNNING = "running"
    WAITING_GENERATION = "waiting_generation"
    WAITING_USER = "waiting_user"
    PAUSED = "paused"
    COMPLETED = "completed"
    STOPPED = "stopped"
    FAILED = "failed"
    ARCHIVED = "archived"


# A task in one of these is parked: it waits for a job, the person, or a resume.
WAITING_TASK = frozenset(
    {TaskStatus.WAITING_GENERATION, TaskStatus.WAITING_USER, TaskStatus.PAUSED}
)
# A task that is working or parked: what routing offers as a candidate.
ACTIVE_TASK = frozenset({TaskStatus.RUNNING, *WAITING_TASK})
# A task in one of these has no running workflow of its own.
TERMINAL_TASK = frozenset(
    {TaskStatus.STOPPED, TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.ARCHIVED}
)
# A task the person closed: routing never delivers to it, and only an explicit restart
# opens it again.
CLOSED_TASK = frozenset({TaskStatus.ARCHIVED, TaskStatus.STOPPED})


class TaskKind(StrEnum):
    LIGHTWEIGHT = "lightweight"
    PERSISTENT = "persistent"


class CardKind(StrEnum):
    CONFIRM = "confirm"
    SELECT = "select"
    CLARIFY = "clarify"
    PRICE = "price"
    FORGET = "forget"
    DELETE = "delete"
    CREDIT = "credit"


class CardStatus(StrEnum):
    OPEN = "open"
    ANSWERED = "answered"
    EXPIRED = "expired"


class CardAction(StrEnum):
    CONFIRM = "confirm"
    REJECT = "reject"
    SELECT = "select"
    REVISE = "revise"


class OrderStatus(StrEnum):
    """A generation order, in the order an upstream job moves through them."""

    CREATED = "created"
    SUBMITTED = "submitted"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    # Stopped upstream at the platform's request (docs/architecture.md#cancelling-a-job):
    # charged nothing before the job started, the catalogue's partial price after.
    CANCELLED = "cancelled"


TERMINAL_ORDER = frozenset({OrderStatus.SUCCEEDED, OrderStatus.FAILED, OrderStatus.CANCELLED})
# How far along each status is: a callback never moves an order back.
ORDER_RANK: dict[str, int] = {
    OrderStatus.CREATED: 0,
    OrderStatus.SUBMITTED: 1,
    OrderStatus.QUEUED: 2,
    OrderStatus.RUNNING: 3,
    OrderStatus.SUCCEEDED: 4,
    OrderStatus.FAILED: 4,
    OrderStatus.CANCELLED: 4,
}


class RoutingStatus(StrEnum):
    PENDING = "pending"
    ROUTED = "routed"


class EventType(StrEnum):
    """The types of the person's event log (`GET /v1/events`, docs/api.md)."""

    MESSAGE_RECEIVED = "message.received"
    MESSAGE_ROUTED = "message.routed"
    MESSAGE_DELIVERED = "message.delivered"
    MESSAGE_READ = "message.read"
    MESSAGE_MOVED = "message.moved"
    MESSAGE_WITHDRAWN = "message.withdrawn"
    TASK_CREATED = "task.created"
    TASK_PROMOTED = "task.promoted"
    TASK_STATUS = "task.status"
    TASK_REPLY = "task.reply"
    REPLY_DELTA = "reply.delta"
    TASK_CHECKLIST = "task.checklist"
    CARD_CREATED = "card.created"
    CARD_ANSWERED = "card.answered"
    GENERATION_PROGRESS = "generation.progress"
    GENERATION_COMPLETED = "generation.completed"
    BUDGET_CHANGED = "budget.changed"
    OBJECT_VERSION = "object.version"
    OBJECT_DELETED = "object.deleted"
    MEMORY_CHANGED = "memory.changed"
    FLOW_RUN = "flow.run"
    FLOW_NODE = "flow.node"
    NUDGE = "nudge"


class PaymentStatus(StrEnum):
    """A top-up payment, in the order the payment provider moves it through them."""

    CREATED = "created"
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


TERMINAL_PAYMENT = frozenset({PaymentStatus.SUCCEEDED, PaymentStatus.FAILED})
# How far along each status is: a webhook never moves a payment back.
PAYMENT_RANK: dict[str, int] = {
    PaymentStatus.CREATED: 0,
    PaymentStatus.PENDING: 1,
    PaymentStatus.SUCCEEDED: 2,
    PaymentStatus.FAILED: 2,
}


class FlowRunStatus(StrEnum):
    PLANNING = "planning"
    WAITING_PRICE = "waiting_price"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DECLINED = "declined"


# A run in one of these still has work ahead: a new run of its flow waits for it.
ACTIVE_FLOW_RUN = frozenset(
    {FlowRunStatus.PLANNING, FlowRunStatus.WAITING_PRICE, FlowRunStatus.RUNNING}
)


class FlowNodeStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    REUSED = "reused"
    FAILED = "failed"
    BLOCKED = "blocked"
    REMOVED = "removed"


# A node in one of these has its result: a later run reuses it.
FINISHED_FLOW_NODE = frozenset({FlowNodeStatus.DONE, FlowNodeStatus.REUSED})

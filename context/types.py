"""What a context is built from: the rows a step's storage loads, as one typed value.

Plain slotted records with only the columns the builder reads: the builder is a pure
function of a `StepData`, the tool set, the policy and what memory found
(`context/build.py`); the step's storage (`journal/`) fills them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from workspace.preview import Preview


@dataclass(slots=True)
class TaskHead:
    """The task's columns a model step reads; `turn` is the turn the context is built for."""

    id: str
    user_id: str
    kind: str
    language: str
    goal: str
    briefing: str
    turn: int
    status: str = ""


@dataclass(slots=True, eq=False)
class StepRow:
    id: int
    turn: int
    step: int
    created_at: datetime
    reported_orders: list[str] | None  # the finished jobs the step was shown
    response: dict[str, Any] | None = None  # loaded for the steps a context shows


@dataclass(slots=True, eq=False)
class CallRow:
    call_id: str
    tool_use_id: str
    name: str
    status: str
    input: dict[str, Any] | None = None
    result: dict[str, Any] | None = None


@dataclass(slots=True, frozen=True)
class MsgRow:
    id: str
    text: str
    processed_turn: int | None
    processed_step: int | None
    created_at: datetime
    attachments: tuple[str, ...] = ()  # the objects it points at, shown with it


@dataclass(slots=True, frozen=True)
class ItemRow:
    id: str
    title: str
    status: str
    requires_confirmation: bool
    artifacts: list[str]
    note: str
    done_turn: int | None


@dataclass(slots=True, frozen=True)
class CardRow:
    id: str
    kind: str
    status: str
    title: str
    payload: dict[str, Any] | None
    answer: dict[str, Any] | None
    answered_at: datetime | None


@dataclass(slots=True, frozen=True)
class OrderRow:
    id: str
    idempotency_key: str
    status: str
    object_id: str | None
    error: str | None
    reference: str | None = None  # the picture a revision started from


@dataclass(slots=True, frozen=True)
class AssetRow:
    id: str
    name: str
    created_at: datetime


@dataclass(slots=True, frozen=True)
class Profile:
    """The person's profile snapshot as the context shows it."""

    text: str = ""
    version: int = 0
    version_ids: tuple[str, ...] = ()  # the memory versions it shows


@dataclass(slots=True)
class Recalled:
    """What memory's search found for this step (empty when it found nothing or failed)."""

    items: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    version_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class StepData:
    """Everything a step's context is built from, loaded in one consistent read."""

    task: TaskHead
    said: list[str]  # the texts of the messages this step processes
    steps: list[StepRow]  # every step of the task; `response` set on those shown in full
    summaries: dict[int, str]  # segment -> summary, only those written for this policy
    prev_prefix: dict[str, Any] | None  # the last step's prefix record
    messages: dict[str, MsgRow]  # the messages shown (forgotten ones left out)
    calls: list[CallRow]  # the calls of the steps shown in full, in call order
    items: list[ItemRow] = field(default_factory=list)
    cards: list[CardRow] = field(default_factory=list)
    orders: list[OrderRow] = field(default_factory=list)
    assets: list[AssetRow] = field(default_factory=list)
    flow_lines: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    profile: Profile = field(default_factory=Profile)
    excluded_steps: set[tuple[int, int]] = field(default_factory=set)
    message_ids: list[str] = field(default_factory=list)  # this step's new messages, in order
    # What the model is shown of objects (pictures, described media), by object id: loaded
    # by the step for the attachments of the messages shown and for `focus` (picture_ids).
    previews: dict[str, Preview] = field(default_factory=dict)


def call_order(call_id: str) -> tuple[int, int, int]:
    """(turn, step, index) of a call, from its id `{task}:{turn}:{step}:{index}`."""
    _, turn, step, index = call_id.rsplit(":", 3)
    return int(turn), int(step), int(index)


def body(step: StepRow) -> dict[str, Any]:
    """A step's response; only the steps a context shows have theirs loaded."""
    if step.response is None:
        raise LookupError(f"the response of step {step.turn}.{step.step} was not loaded")
    return step.response

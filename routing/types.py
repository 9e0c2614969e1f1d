"""The routing activity's input and output (small values only: they live in history)."""

from __future__ import annotations

from dataclasses import dataclass

DECISIONS = ("answer", "lightweight", "existing", "new", "clarify")
# The router's other tool (routing/prompt.py, MOVE_TOOL): the person's previous message
# goes to another task.
MOVE = "move"


@dataclass
class RouteRequest:
    user_id: str
    # A message id, or the id of an answered `clarify` card (then the card's message is
    # routed to the option the person chose).
    message_id: str


@dataclass
class RoutePlan:
    """What the main thread does next."""

    decision: str  # answer | lightweight | existing | new | clarify | move
    task_id: str | None = None
    kind: str | None = None
    max_steps_per_turn: int = 8
    generation_wait_seconds: float = 60.0
    max_turns_without_progress: int = 2
    card_wait_seconds: float = 300.0
    heartbeat_timeout_seconds: float = 30.0
    generation_wait_max_seconds: float = 600.0
    card_wait_max_seconds: float = 3600.0
    message_id: str | None = None  # the message to hand over (differs for clarify answers)
    # existing: the task's workflow has ended (completed lightweight, reopened) and must be
    # started again in place; else the message is signalled into the running inbox.
    restart: bool = False
    turn: int = 0  # the task's last turn, for a restart
    promote: bool = False  # lightweight → persistent before delivering
    # The item was routed before by another activity (a second hand-off of the same
    # message after an api retry): its hand-over happened or is happening there, so the
    # main thread must not deliver it or start its task a second time.
    repeat: bool = False
    running_visible_seconds: float = 2.0
    # move: the task the moved message left, told after the copy is handed over: the
    # message to drop unread (`left_message`), or the notice to deliver once it was read.
    left_task: str | None = None
    left_message: str | None = None
    left_notice: str | None = None

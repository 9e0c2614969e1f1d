"""MainThreadWorkflow's contract (workflows/main_thread.py): one per person, id
`main:{user_id}`, routing the messages that have no task yet."""

from __future__ import annotations

from dataclasses import dataclass, field

WORKFLOW = "MainThreadWorkflow"

# Signal: a message id, or the id of an answered clarify card, to route.
ROUTE = "route"


def workflow_id(user_id: str) -> str:
    return f"main:{user_id}"


@dataclass
class MainThreadInput:
    user_id: str
    pending_message_ids: list[str] = field(default_factory=list)
    # A dead worker's routing is retried after this (the routing heartbeats); runs started
    # before the field existed read the default.
    heartbeat_timeout_seconds: float = 30.0

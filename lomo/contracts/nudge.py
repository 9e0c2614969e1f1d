"""NudgeWorkflow's contract (workflows/nudge.py): one per person, id `nudge:{user_id}`.

The api signal-with-starts it with `touch` whenever the person does something (a message,
a card answer, a change of their nudge settings): the workflow then looks again at once.
"""

from __future__ import annotations

from dataclasses import dataclass

WORKFLOW = "NudgeWorkflow"

TOUCH = "touch"  # no argument: look again now


def workflow_id(user_id: str) -> str:
    return f"nudge:{user_id}"


@dataclass
class NudgeInput:
    user_id: str
    # From settings (workflow code reads no environment): how often to look again while a
    # task of the person works, and the rounds before the workflow continues as new.
    check_seconds: float = 900.0
    rounds: int = 100

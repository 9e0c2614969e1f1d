"""The nudge workflow's activity: one round of reminding the person (nudges/store.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from lomo import clock
from lomo.db.engine import Database
from lomo.settings import Settings
from nudges.schedule import Policy
from nudges.store import nudge_round


@dataclass
class NudgeRoundInput:
    user_id: str


@dataclass
class NudgeRoundOutcome:
    sent: list[str]  # the tasks the round's one nudge was about
    next_in_seconds: float | None  # until the next nudge is due (None: none planned)
    working: bool  # a task of the person still works


def policy(settings: Settings) -> Policy:
    return Policy(settings.nudge_base_seconds, settings.nudge_cap_seconds, settings.nudge_max)


class NudgeActivities:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings

    @activity.defn(name="nudge_round")
    async def nudge_round(self, inp: NudgeRoundInput) -> NudgeRoundOutcome:
        if not inp.user_id:
            raise ApplicationError("user_id is required", type="InvalidInput", non_retryable=True)
        now = clock.now()
        async with self.db.session() as s:
            r = await nudge_round(s, inp.user_id, now, policy(self.settings))
        wait = (r.next_at - now).total_seconds() if r.next_at is not None else None
        return NudgeRoundOutcome(r.sent, wait, r.working)

    def all(self) -> list[Any]:
        return [self.nudge_round]

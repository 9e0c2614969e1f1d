"""Nudges end to end: the person's nudge workflow on the real Temporal dev server, the api's
routes, the database; durations made seconds by settings (docs/architecture.md#nudges).

The room's round is also run on its own with the clock given: an answer by the person
resets the back-off, "don't nudge" is kept, and a round run twice sends nothing twice."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import select
from temporalio.client import Client

from lomo import clock
from lomo.auth import create_user
from lomo.contracts import nudge as contract
from lomo.db.engine import Database
from lomo.db.models import Card, Event, MessageRow, Task
from lomo.ids import new_id
from lomo.states import EventType, TaskStatus
from nudges.schedule import Policy
from nudges.store import nudge_round, set_task_nudges
from tests.helpers import eventually
from tests.runtime_support import replay_and_maybe_record
from tests.stack import Stack, running_stack

ZONE = "Europe/Berlin"
# Seconds for hours: the first nudge 2 s after the task began to wait, each ignored one
# doubling the wait up to 8 s.
FAST = {
    "nudge_base_seconds": 2.0,
    "nudge_cap_seconds": 8.0,
    "nudge_max": 5,
    "nudge_check_seconds": 0.5,
    "nudge_rounds": 3,  # continue-as-new during the test: nothing is carried, nothing lost
}
SLACK = 1.0  # seconds a nudge may come late (a timer, one activity, a busy machine)
EARLY = 0.2  # or early (the workflow's timer against the database's clock)


async def _task(db: Database, user_id: str, status: str, goal: str, since: datetime) -> str:
    tid = new_id("tsk")
    async with db.session() as s:
        s.add(
            Task(
                id=tid,
                user_id=user_id,
                kind="persistent",
                status=status,
                goal=goal,
                created_at=since,
                updated_at=since,
            )
        )
    return tid


async def _nudges(st: Stack) -> list[tuple[datetime, list[str]]]:
    async with st.db.session() as s:
        rows = await s.scalars(
            select(Event).where(Event.user_id == st.user_id, Event.type == EventType.NUDGE)
        )
        return [(datetime.fromisoformat(e.data["at"]), e.data["task_ids"]) for e in rows]


async def _lines(st: Stack, tid: str) -> list[str]:
    async with st.db.session() as s:
        rows = await s.scalars(
            select(Event)
            .where(Event.user_id == st.user_id, Event.type == EventType.TASK_REPLY)
            .order_by(Event.seq)
        )
        return [e.data["text"] for e in rows if e.data.get("task_id") == tid]


def _wall(at: datetime) -> str:
    return at.astimezone(ZoneInfo(ZONE)).time().replace(microsecond=0).isoformat()


async def test_a_person_with_quiet_hours_who_ignores_two_nudges(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """Posters finished at t=0, a flyer's card waits from t=1.5, quiet from t=3 to t=9
    (the person's clock in Berlin), a third task set to "don't nudge". Posters: t=2,
    then (its next at 2+4 fell in the quiet) t=9 together with the flyer's first (due
    3.5, in the quiet) as ONE nudge, then t=9+8 (two ignored: 2 s doubled twice, the cap).
    The flyer's second: t=9+4."""
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, **FAST
    ) as st:
        # On a whole second (quiet hours are set to the second), with time to set up.
        t0 = clock.now().replace(microsecond=0) + timedelta(seconds=2)
        posters = await _task(st.db, st.user_id, TaskStatus.COMPLETED, "Retro posters", t0)
        flyer = await _task(
            st.db, st.user_id, TaskStatus.WAITING_USER, "Concert flyer", t0 + timedelta(seconds=1.5)
        )
        quiet = await _task(st.db, st.user_id, TaskStatus.COMPLETED, "Old sketches", t0)
        r = await st.api.put(f"/v1/tasks/{quiet}/nudges", json={"enabled": False}, headers=st.auth)
        assert r.status_code == 200 and r.json()["enabled"] is False, r.text
        body = {
            "start": _wall(t0 + timedelta(seconds=3)),
            "end": _wall(t0 + timedelta(seconds=9)),
            "time_zone": ZONE,
        }
        r = await st.api.put("/v1/me/quiet-hours", json=body, headers=st.auth)
        assert r.status_code == 200, r.text
        assert (await st.api.get("/v1/me/quiet-hours", headers=st.auth)).json() == body

        async def four() -> Any:
            got = await _nudges(st)
            return got if len(got) >= 4 else None

        sent = await eventually(four, within=40, interval=0.2)
        schedule = [(round((at - t0).total_seconds(), 1), tasks) for at, tasks in sent]
        print("\nnudge schedule (seconds after t0; quiet 3-9; base 2, cap 8):")
        for offset, tasks in schedule:
            names = ["posters" if t == posters else "flyer" for t in tasks]
            print(f"  t={offset:>5.1f}  {', '.join(names)}")
        # Each after the one it follows by its wait (a late round delays what follows it).
        assert [tasks for _, tasks in schedule] == [
            [posters],
            sorted([posters, flyer]),
            [flyer],
            [posters],
        ], schedule
        first, batch, third, fourth = (offset for offset, _ in schedule)
        assert 2.0 - EARLY <= first <= 2.0 + SLACK, schedule
        assert 9.0 - EARLY <= batch <= 9.0 + SLACK, schedule  # at the quiet's end
        assert 4.0 - EARLY <= third - batch <= 4.0 + SLACK, schedule
        assert 8.0 - EARLY <= fourth - batch <= 8.0 + SLACK, schedule
        said = await _lines(st, posters)
        print("posters said:", *said, sep="\n  ")
        assert said[0].endswith("I'll wait 4 seconds before reminding you again.")
        assert said[1].endswith("I'll wait 8 seconds before reminding you again.")
        assert said[2].endswith("I'll wait 8 seconds before reminding you again.")  # the cap
        assert not await _lines(st, quiet)
        r = await st.api.get(f"/v1/tasks/{posters}/nudges", headers=st.auth)
        assert r.json()["ignored"] == 3, r.text
        assert await replay_and_maybe_record(
            temporal_client, contract.workflow_id(st.user_id), "nudge_quiet"
        )


POLICY = Policy(base=60.0, cap=240.0, most=3)


async def test_an_answer_resets_the_back_off_and_dont_nudge_is_kept(db_url: str) -> None:
    db = Database(db_url)
    async with db.session() as s:
        user, _ = await create_user(s, "nudged")
    t0 = clock.now()
    tid = await _task(db, user.id, TaskStatus.WAITING_USER, "Poster series", t0)
    other = await _task(db, user.id, TaskStatus.WAITING_USER, "Logo", t0)
    async with db.session() as s:
        await set_task_nudges(s, user.id, other, enabled=False)

    async def round_at(seconds: float) -> list[str]:
        async with db.session() as s:
            r = await nudge_round(s, user.id, t0 + timedelta(seconds=seconds), POLICY)
        return r.sent

    assert await round_at(59) == []
    assert await round_at(60) == [tid]
    assert await round_at(60) == []  # run again (a retried activity): nothing twice
    assert await round_at(60 + 119) == []
    assert await round_at(60 + 120) == [tid]  # one ignored: 60 s doubled
    # The person answers: the back-off starts over from the answer.
    async with db.session() as s:
        s.add(
            MessageRow(
                id=new_id("msg"),
                user_id=user.id,
                text="yes, go on",
                task_id=tid,
                created_at=t0 + timedelta(seconds=200),
            )
        )
    assert await round_at(259) == []
    assert await round_at(260) == [tid]
    async with db.session() as s:
        lines = list(
            await s.scalars(
                select(Event.data["text"].as_string()).where(
                    Event.user_id == user.id, Event.type == EventType.TASK_REPLY
                )
            )
        )
    assert lines == [
        "A question here is still waiting for your answer. "
        "I'll wait 2 minutes before reminding you again.",
        "A question here is still waiting for your answer. "
        "I'll wait 4 minutes before reminding you again.",
        "A question here is still waiting for your answer. "
        "I'll wait 2 minutes before reminding you again.",
    ]
    # Reminded enough: after `most` unanswered ones the task says it stops.
    assert await round_at(260 + 120) == [tid]
    assert await round_at(260 + 120 + 240) == [tid]
    assert await round_at(10_000) == []
    async with db.session() as s:
        last = await s.scalar(
            select(Event.data["text"].as_string())
            .where(Event.user_id == user.id, Event.type == EventType.TASK_REPLY)
            .order_by(Event.seq.desc())
            .limit(1)
        )
    assert last is not None and last.endswith("I won't remind you of this again.")
    # A card answer counts as the person's answer too: the reminders start over.
    async with db.session() as s:
        s.add(
            Card(
                id=new_id("crd"),
                user_id=user.id,
                task_id=tid,
                kind="confirm",
                status="answered",
                title="Go on?",
                answered_at=t0 + timedelta(seconds=700),
            )
        )
    assert await round_at(759) == []
    assert await round_at(760) == [tid]
    await db.dispose()

"""The nudge schedule as pure functions (nudges/schedule.py): quiet hours across midnight
and in the person's time zone (daylight saving included), the wait doubling per ignored
nudge up to its cap and the end of reminding, and nudges that fall in quiet hours going
out together as one when they end."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from lomo.words import duration
from nudges.schedule import (
    Policy,
    QuietHours,
    Watch,
    next_nudge,
    outside_quiet,
    plan,
    simulate,
    valid_zone,
    wait_after,
)

HOUR = 3600.0
POLICY = Policy(base=2 * HOUR, cap=12 * HOUR, most=5)
BERLIN_NIGHT = QuietHours(time(22), time(7), "Europe/Berlin")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("at", "quiet"),
    [
        (utc(2026, 1, 15, 20, 59), False),  # 21:59 in Berlin (UTC+1 in winter)
        (utc(2026, 1, 15, 21, 0), True),  # 22:00
        (utc(2026, 1, 15, 23, 30), True),  # 00:30, after midnight
        (utc(2026, 1, 16, 5, 59), True),  # 06:59
        (utc(2026, 1, 16, 6, 0), False),  # 07:00: quiet has ended
        (utc(2026, 7, 15, 20, 0), True),  # 22:00 in summer (UTC+2)
        (utc(2026, 7, 15, 19, 59), False),
    ],
)
def test_quiet_hours_cross_midnight_on_the_persons_clock(at: datetime, quiet: bool) -> None:
    assert BERLIN_NIGHT.contains(at) is quiet


def test_quiet_ends_at_the_next_local_end() -> None:
    assert BERLIN_NIGHT.ends_after(utc(2026, 1, 15, 21, 30)) == utc(2026, 1, 16, 6, 0)
    assert BERLIN_NIGHT.ends_after(utc(2026, 1, 16, 1, 0)) == utc(2026, 1, 16, 6, 0)
    # The night daylight saving starts (29 March 2026): 07:00 is already UTC+2.
    assert BERLIN_NIGHT.ends_after(utc(2026, 3, 28, 23, 0)) == utc(2026, 3, 29, 5, 0)
    assert outside_quiet(utc(2026, 1, 15, 12, 0), BERLIN_NIGHT) == utc(2026, 1, 15, 12, 0)


def test_the_same_hours_in_another_zone_are_another_moment() -> None:
    tokyo = QuietHours(time(22), time(7), "Asia/Tokyo")  # UTC+9
    at = utc(2026, 1, 15, 14, 0)  # 23:00 in Tokyo, 15:00 in Berlin
    assert tokyo.contains(at) and not BERLIN_NIGHT.contains(at)
    assert tokyo.ends_after(at) == utc(2026, 1, 15, 22, 0)


def test_quiet_within_a_day_and_none_at_all() -> None:
    lunch = QuietHours(time(12), time(13, 30), "UTC")
    assert lunch.contains(utc(2026, 1, 1, 12, 45)) and not lunch.contains(utc(2026, 1, 1, 13, 30))
    assert not QuietHours(time(9), time(9), "UTC").contains(utc(2026, 1, 1, 9, 0))
    assert valid_zone("Europe/Berlin") and not valid_zone("Mars/Olympus")


def test_each_ignored_nudge_doubles_the_wait_up_to_the_cap() -> None:
    assert [wait_after(n, POLICY) / HOUR for n in range(1, 6)] == [4, 8, 12, 12, 12]
    start = utc(2026, 1, 15, 8, 0)
    assert next_nudge(start, None, 0, POLICY, None) == start + timedelta(hours=2)
    last = utc(2026, 1, 15, 10, 0)
    assert next_nudge(start, last, 1, POLICY, None) == last + timedelta(hours=4)
    assert next_nudge(start, last, 3, POLICY, None) == last + timedelta(hours=12)
    assert next_nudge(start, last, 5, POLICY, None) is None  # reminded enough


def test_nudges_in_quiet_hours_go_out_as_one_when_they_end() -> None:
    # Both tasks fall due in the night: one nudge at 07:00 Berlin (06:00 UTC).
    watches = [
        Watch("tsk_a", utc(2026, 1, 15, 20, 0)),  # due 22:00 UTC = 23:00 Berlin
        Watch("tsk_b", utc(2026, 1, 16, 1, 0)),  # due 03:00 UTC = 04:00 Berlin
    ]
    p = plan(watches, utc(2026, 1, 16, 3, 0), POLICY, BERLIN_NIGHT)
    assert p.due == [] and p.next_at == utc(2026, 1, 16, 6, 0)
    p = plan(watches, utc(2026, 1, 16, 6, 0), POLICY, BERLIN_NIGHT)
    assert p.due == ["tsk_a", "tsk_b"]


def test_a_nudge_due_before_the_quiet_but_late_waits_for_its_end() -> None:
    w = Watch("tsk_a", utc(2026, 1, 15, 18, 50))  # due 20:50 UTC, 21:50 Berlin
    p = plan([w], utc(2026, 1, 15, 21, 5), POLICY, BERLIN_NIGHT)  # looked at in the quiet
    assert p.due == [] and p.next_at == utc(2026, 1, 16, 6, 0)


def test_a_person_with_quiet_hours_who_ignores_two_nudges() -> None:
    """The schedule of the closing note: two tasks, quiet 22:00-07:00 Berlin, no answer."""
    start = utc(2026, 1, 15, 18, 0)  # 19:00 in Berlin
    watches = [Watch("posters", start), Watch("flyer", start + timedelta(hours=1, minutes=30))]
    sent = simulate(watches, start, start + timedelta(days=1), POLICY, BERLIN_NIGHT)
    local = [(at.astimezone(BERLIN_NIGHT.tz()).strftime("%a %H:%M"), ts) for at, ts in sent]
    assert local == [
        ("Thu 21:00", ["posters"]),  # start + 2 h
        ("Fri 07:00", ["flyer", "posters"]),  # both fell in the quiet: one nudge at its end
        ("Fri 11:00", ["flyer"]),  # 07:00 + 4 h (one ignored: 2 h doubled)
        ("Fri 15:00", ["posters"]),  # 07:00 + 8 h (two ignored: doubled twice)
        ("Fri 19:00", ["flyer"]),  # 11:00 + 8 h
    ]
    print("\nnudge schedule (Europe/Berlin; quiet 22:00-07:00; base 2 h, cap 12 h):")
    for (at, tasks), (shown, _) in zip(sent, local, strict=True):
        print(f"  {shown}  +{(at - start) / timedelta(hours=1):>4.1f} h  {', '.join(tasks)}")


def test_waits_are_said_in_words() -> None:
    assert duration(2 * HOUR) == "2 hours" and duration(4 * HOUR, "de") == "4 Stunden"
    assert duration(90 * 60) == "90 minutes" and duration(1) == "1 second"

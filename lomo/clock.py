"""The platform's wall clock: real UTC time, moved forward by a TEST-ONLY offset.

Every timestamp the api and the activities record (rows' created/updated times, the
router's "active 3d ago", the daily free amount's UTC day, memory validity intervals)
comes from `now()`. The scenario harness (`lomo scenarios`) lets days pass by writing a
number of seconds into `LOMO_TEST_CLOCK_FILE`; every process of the stack reads it on
each call, so the whole stack agrees on the simulated time. Workflow code never calls
this: it uses `workflow.now()`. Never set the file outside tests.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lomo.settings import get_settings


def offset() -> timedelta:
    path = get_settings().test_clock_file
    if path is None:
        return timedelta(0)
    try:
        return timedelta(seconds=float(path.read_text().strip() or 0))
    except (OSError, ValueError):
        return timedelta(0)  # no file yet, or half written: real time


def now() -> datetime:
    return datetime.now(UTC) + offset()


def utc(at: datetime) -> datetime:
    """A stored time as UTC: SQLite hands timezone-aware columns back naive."""
    return at if at.tzinfo else at.replace(tzinfo=UTC)

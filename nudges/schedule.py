"""When to remind the person: pure functions of the times, the counts and the person's
settings (docs/architecture.md#nudges). Times are aware datetimes in UTC; quiet hours are
wall-clock times in the person's time zone, so they follow its daylight saving.

A task is watched from `since` (its card began to wait, or its work was finished, or the
person last answered it). The first nudge falls `base` after `since`; after each nudge
that goes unanswered the wait doubles, up to `cap`; after `most` unanswered nudges there
are no more. A nudge that falls in quiet hours moves to their end, where every other one
that fell in them waits too: they go out as one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


@dataclass(frozen=True)
class Policy:
    base: float  # seconds to the first nudge
    cap: float  # the longest wait between two nudges, in seconds
    most: int  # unanswered nudges after which the task stops reminding


@dataclass(frozen=True)
class QuietHours:
    """From `start` to `end` on the clock of `zone`; `start` after `end` crosses midnight,
    `start == end` is no quiet at all."""

    start: time
    end: time
    zone: str

    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    def contains(self, at: datetime) -> bool:
        clock = at.astimezone(self.tz()).time().replace(tzinfo=None)
        if self.start == self.end:
            return False
        if self.start < self.end:
            return self.start <= clock < self.end
        return clock >= self.start or clock < self.end

    def ends_after(self, at: datetime) -> datetime:
        """The first end of quiet hours after `at`, in UTC."""
        local = at.astimezone(self.tz())
        for days in (0, 1, 2):  # a DST gap can swallow one day's end
            end = _wall(local.date() + timedelta(days=days), self.end, self.tz())
            if end > at:
                return end.astimezone(at.tzinfo)
        raise AssertionError("unreachable: an end falls within two days")


def _wall(day: date, t: time, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, t, tzinfo=tz)


def valid_zone(zone: str) -> bool:
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def wait_after(ignored: int, policy: Policy) -> float:
    """Seconds from a nudge to the next, after `ignored` unanswered ones (ignored >= 1)."""
    return min(policy.base * 2 ** max(ignored, 0), policy.cap)


def outside_quiet(at: datetime, quiet: QuietHours | None) -> datetime:
    return quiet.ends_after(at) if quiet is not None and quiet.contains(at) else at


def next_nudge(
    since: datetime,
    last_nudge: datetime | None,
    ignored: int,
    policy: Policy,
    quiet: QuietHours | None,
) -> datetime | None:
    """When the task's next nudge goes out; None when it has reminded enough."""
    if ignored >= policy.most:
        return None
    if last_nudge is None:
        raw = since + timedelta(seconds=policy.base)
    else:
        raw = last_nudge + timedelta(seconds=wait_after(ignored, policy))
    return outside_quiet(raw, quiet)


@dataclass(frozen=True)
class Watch:
    """One task the person may be reminded of."""

    task_id: str
    since: datetime
    last_nudge: datetime | None = None
    ignored: int = 0


@dataclass(frozen=True)
class Plan:
    due: list[str]  # the tasks to remind of now, in one nudge
    next_at: datetime | None  # the next nudge after these (None: none planned)


def plan(watches: list[Watch], now: datetime, policy: Policy, quiet: QuietHours | None) -> Plan:
    """The tasks due at `now` (sent as one nudge), and when the next one is due. Nothing
    is due inside quiet hours: what falls in them waits for their end."""
    times = {
        w.task_id: next_nudge(w.since, w.last_nudge, w.ignored, policy, quiet) for w in watches
    }
    quiet_now = quiet is not None and quiet.contains(now)
    due = sorted(t for t, at in times.items() if at is not None and at <= now and not quiet_now)
    later = [at for t, at in times.items() if at is not None and t not in due]
    if quiet_now:
        # Also those that fell due before the quiet began: all go out at its end.
        later = [outside_quiet(max(at, now), quiet) for at in later]
    return Plan(due, min(later) if later else None)


def after_nudge(w: Watch, at: datetime) -> Watch:
    return Watch(w.task_id, w.since, at, w.ignored + 1)


def simulate(
    watches: list[Watch], start: datetime, until: datetime, policy: Policy, q: QuietHours | None
) -> list[tuple[datetime, list[str]]]:
    """The nudges a person who never answers gets between `start` and `until`: each
    (time, tasks in that one nudge). The schedule the platform follows, step by step."""
    sent: list[tuple[datetime, list[str]]] = []
    now, current = start, {w.task_id: w for w in watches}
    while True:
        p = plan(list(current.values()), now, policy, q)
        if p.due:
            sent.append((now, p.due))
            for t in p.due:
                current[t] = after_nudge(current[t], now)
            continue
        if p.next_at is None or p.next_at > until:
            return sent
        now = max(p.next_at, now)

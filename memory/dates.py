"""Event dates of what the person said: the day a message was said, and relative dates in it
("yesterday", "last week", "two months ago") resolved against that day.

The resolved dates are written next to the words in the memory's search text, so a question
about "May 2023" or "the week before 8 May" finds a message that only said "last week".
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "few": 3,
    "couple of": 2,
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_AGO = re.compile(
    r"\b(?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of)\s+"
    r"(?P<unit>day|week|month|year)s?\s+ago\b",
    re.I,
)
_LAST = re.compile(
    r"\b(?P<which>last|next|this|past)\s+(?P<unit>week|weekend|month|year|"
    + "|".join(_WEEKDAYS)
    + r")\b",
    re.I,
)
_DAY = re.compile(r"\b(yesterday|today|tonight|tomorrow)\b", re.I)


def day_words(d: date) -> str:
    """A day as the words a question uses: "8 May 2023"."""
    return f"{d.day} {d:%B} {d.year}"


def month_words(d: date) -> str:
    return f"{d:%B} {d.year}"


def _shift_months(d: date, months: int) -> date:
    total = d.year * 12 + d.month - 1 + months
    return date(total // 12, total % 12 + 1, 1)


def _ago(n: int, unit: str, day: date) -> str:
    if unit == "day":
        return day_words(day - timedelta(days=n))
    if unit == "week":
        return "the week of " + day_words(day - timedelta(weeks=n))
    if unit == "month":
        return month_words(_shift_months(day, -n))
    return str(day.year - n)


def _relative(which: str, unit: str, day: date) -> str:
    step = {"last": -1, "past": -1, "next": 1, "this": 0}[which]
    if unit in ("week", "weekend"):
        start = day - timedelta(days=day.weekday()) + timedelta(weeks=step)
        if unit == "weekend":
            return "the weekend of " + day_words(start + timedelta(days=5))
        return "the week of " + day_words(start)
    if unit == "month":
        return month_words(_shift_months(day, step))
    if unit == "year":
        return str(day.year + step)
    # A weekday: "last Friday" is the latest Friday before the day, "next" the first after.
    target = _WEEKDAYS.index(unit)
    delta = (day.weekday() - target) % 7 or 7
    if step > 0:
        return day_words(day + timedelta(days=(target - day.weekday()) % 7 or 7))
    return day_words(day - timedelta(days=delta))


def resolve(text: str, said_at: datetime) -> list[str]:
    """The absolute dates the relative dates in `text` stand for, in order, without repeats:
    "I went there yesterday" said on 8 May 2023 → ["7 May 2023"]."""
    day = said_at.date()
    found: list[tuple[int, str]] = []
    for m in _DAY.finditer(text):
        offset = {"yesterday": -1, "tomorrow": 1}.get(m.group(1).lower(), 0)
        found.append((m.start(), day_words(day + timedelta(days=offset))))
    for m in _AGO.finditer(text):
        n = m["n"].lower()
        count = int(n) if n.isdigit() else _NUMBERS[n]
        found.append((m.start(), _ago(count, m["unit"].lower(), day)))
    for m in _LAST.finditer(text):
        found.append((m.start(), _relative(m["which"].lower(), m["unit"].lower(), day)))
    return list(dict.fromkeys(words for _, words in sorted(found)))


def dated(text: str, said_at: datetime) -> str:
    """The search text of something said at `said_at`: the words, the day, resolved dates."""
    resolved = resolve(text, said_at)
    note = f"said on {day_words(said_at.date())}"
    if resolved:
        note += "; refers to " + ", ".join(resolved)
    return f"{text} ({note})"

"""What a request names, read off its words (the intent itself comes from
standin/intents.py): how many pieces, how long, which formats and colours, and a short
name of the work for replies. English and German.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "twelve": 12, "ein": 1, "eine": 1, "einen": 1, "zwei": 2, "drei": 3,
    "vier": 4, "fünf": 5, "sechs": 6, "sieben": 7, "acht": 8, "neun": 9, "zehn": 10,
    "zwölf": 12, "dreißig": 30, "thirty": 30, "twenty": 20, "zwanzig": 20,
}  # fmt: skip
_NUMBER = r"\b(\d+|" + "|".join(_NUMBERS) + r")\b"
_DURATION = re.compile(_NUMBER + r"[\s-]*(?:seconds?|secs?|s\b|sekunden?)", re.I)
# "four posters": a number before a word, not inside a ratio ("9:16") and not a duration.
_COUNT = re.compile(
    r"(?<![:\d])" + _NUMBER + r"\s+(?!seconds?|sekunden?|minutes?|minuten?)([^\W\d_]{3,})", re.I
)
_FORMAT = re.compile(
    r"\b(\d+:\d+|square|quadratisch\w*|portrait|hochformat|landscape|querformat|"
    r"A[0-6]|png|jpe?g|svg|mp4|wav|mp3|obj|gif)\b",
    re.I,
)
_COLOUR = re.compile(
    r"\b(red|blue|green|yellow|orange|purple|pink|black|white|grey|gray|brown|teal|gold|"
    r"pastel|rot|blau|grün|gelb|lila|rosa|schwarz|weiß|grau|braun|türkis|golden)\w*",
    re.I,
)
_NUMBERED = re.compile(r"(?:^|\s)\d{1,2}[.)]\s+\S")  # "1. A lighthouse at dawn. 2. Gulls"
_OBJECT = re.compile(r"\b(?:obj|tsk|ord|crd|chk)_[0-9a-z]+\b")
_NAME_LIMIT = 60


@dataclass
class Requested:
    count: int | None = None  # pieces asked for ("four posters", a numbered list)
    duration_s: int | None = None
    formats: list[str] = field(default_factory=list)
    colours: list[str] = field(default_factory=list)
    name: str = ""  # the request in the person's words, short, without raw ids


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word.lower()]


def requested(text: str) -> Requested:
    out = Requested()
    if m := _DURATION.search(text):
        out.duration_s = _number(m.group(1))
    counts = [_number(m.group(1)) for m in _COUNT.finditer(text) if _number(m.group(1)) > 1]
    numbered = len(_NUMBERED.findall(text))
    if numbered > 1:
        counts.append(numbered)
    out.count = max(counts) if counts else None
    out.formats = list(dict.fromkeys(m.group(1) for m in _FORMAT.finditer(text)))
    out.colours = list(dict.fromkeys(m.group(0).lower() for m in _COLOUR.finditer(text)))
    out.name = work_name(text)
    return out


def work_name(text: str) -> str:
    """The person's own words for the work, without object ids, cut at a word boundary."""
    words = " ".join(_OBJECT.sub("", text).split()).strip(" .!?")
    if len(words) <= _NAME_LIMIT:
        return words
    return words[:_NAME_LIMIT].rsplit(" ", 1)[0] + " …"

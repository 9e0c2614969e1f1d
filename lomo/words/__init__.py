"""Every sentence Lomo shows a person, one catalogue per language.

Code names a sentence by its key and passes the values it needs; the catalogue holds the
words. `say("route.lost", "de")` gives the German sentence, any language without a
catalogue gets English. Both catalogues hold the same keys with the same placeholders
(checked by tests/test_words.py), so a sentence is never missing in one language.
"""

from __future__ import annotations

from typing import Any

from lomo.words import de, en

CATALOGUES: dict[str, dict[str, str]] = {"en": en.WORDS, "de": de.WORDS}
DEFAULT_LANGUAGE = "en"


class MissingWords(KeyError):
    """A key that no catalogue holds: a programming error, raised loudly."""


def say(key: str, language: str | None = None, **values: Any) -> str:
    """The sentence `key` in `language` (English when the language has no catalogue),
    with `values` put into its `{placeholders}`."""
    words = CATALOGUES.get(language or DEFAULT_LANGUAGE, CATALOGUES[DEFAULT_LANGUAGE])
    try:
        template = words[key]
    except KeyError:
        raise MissingWords(key) from None
    return template.format(**values) if values else template


def euros(cents: int, language: str | None = None) -> str:
    """An amount in euros the way the language writes it: 12.50 in English, 12,50 in German."""
    text = f"{cents / 100:.2f}"
    return text.replace(".", ",") if language == "de" else text


# Units from the largest down: a wait is said in the largest unit that divides it evenly
# enough to read ("2 hours", "90 minutes", "4 seconds").
_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def duration(seconds: float, language: str | None = None) -> str:
    """A wait in words, in the largest whole unit: 7200 → "2 hours", 5400 → "90 minutes"."""
    whole = max(round(seconds), 0)
    for unit, size in _UNITS:
        if whole >= size and whole % size == 0:
            n = whole // size
            return say(f"duration.{unit}.{'one' if n == 1 else 'many'}", language, n=n)
    return say("duration.second.many", language, n=whole)

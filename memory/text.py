"""Text normalization shared by extraction judging and suppression matching."""

from __future__ import annotations

import hashlib
import re
import unicodedata

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Words that carry no content: "blue with cream white" and "blue, cream white" match.
_STOP = frozenset(
    "a an the and or with of to in on is are be our my we i it this that for at as "
    "ein eine einer der die das und oder mit von zu im in ist sind unser unsere mein meine "
    "wir ich es dies diese für als".split()
)


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_WORD.findall(text))


def tokens(text: str) -> frozenset[str]:
    return frozenset(w for w in normalize(text).split() if w not in _STOP)


def text_hash(text: str) -> str:
    return hashlib.sha256(normalize(text).encode()).hexdigest()


def key_part(text: str) -> str:
    """A subject or attribute as a stable key: `Main colour` → `main_colour`."""
    return "_".join(normalize(text).split())[:120]

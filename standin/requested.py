"""What a request names, read off its words (the intent itself comes from
standin/intents.py, which also weighs these details): how many pieces, how long, which
media its nouns name, whether it lists several items or is put as a question, which
formats and colours, and a short name of the work for replies. English and German.
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
# Also the German compound ("zehnsekündigen"); only a whole number word runs on into it.
_DURATION = re.compile(
    _NUMBER + r"[\s-]*(?:seconds?|secs?|s\b|sekunden?)|" + _NUMBER[:-2] + r"sekündig\w*", re.I
)
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
# The nouns that name a medium, English and German, also ending a German compound
# ("Werbeclip", "Hintergrundmusik").
_MEDIA_NOUNS = {
    "image": r"images?|pictures?|photos?|illustrations?|drawings?|paintings?|posters?|logos?|"
    r"icons?|flyers?|banners?|stickers?|cards?|bild|bilder|fotos?|zeichnung(?:en)?|"
    r"gemälde|plakate?|karten?|illustration(?:en)?",
    "video": r"videos?|clips?|films?|filme|animations?|animation(?:en)?|trailers?|reels?|"
    r"footage|timelapse|zeitraffer|aufnahme",
    "audio": r"audio|songs?|music|musik|jingles?|melod(?:y|ies|ie|ien)|soundtracks?|tracks?|"
    r"sounds?|lied(?:er)?|geräusche?|klänge|voiceover|sprachaufnahme",
    "3d": r"3d|three-dimensional|dreidimensional\w*|glb",
}
_MEDIUM = {
    medium: re.compile(r"(?<![\w-])[^\W\d_]*(?:" + nouns + r")\b", re.I)
    for medium, nouns in _MEDIA_NOUNS.items()
}
# The items of an enumeration: "invitations, a menu card, and a song", "A, B und C".
_ITEM_SEP = re.compile(r"\s*[,;:]\s*(?:and\s+|und\s+)?|\s+(?:and|und|plus|sowie)\s+", re.I)
# A question: its mark, or (casual writers leave the mark out) an opening that asks rather
# than requests; "can you …" and "kannst du …" usually request work, so they are not here.
_ASKS = re.compile(
    r"\?\s*$|^\s*(?:do|did|does|what|which|who|where|when|how|have|has|is|are|"
    r"weißt|hast|hatte|habe|was|welche\w*|wer|wo|wann|wie|erinnerst|kennst|ist|sind)\b",
    re.I,
)
_NUMBERED = re.compile(r"(?:^|\s)\d{1,2}[.)]\s+\S")  # "1. A lighthouse at dawn. 2. Gulls"
_OBJECT = re.compile(r"\b(?:obj|tsk|ord|crd|chk)_[0-9a-z]+\b")
_NAME_LIMIT = 60
_WORD = re.compile(r"[ \t]+([^\W\d_]{3,})\b")
# Words that end the name of what is counted ("four posters for the fair").
_LINKS = {
    "for", "about", "with", "and", "from", "that", "which", "each", "the", "our", "your",
    "für", "über", "mit", "und", "von", "aus", "die", "der", "das", "den", "dem", "unsere",
    "jeweils", "im", "in",
}  # fmt: skip


@dataclass
class Requested:
    count: int | None = None  # pieces asked for ("four posters", a numbered list)
    piece: str = ""  # the person's word for what is counted ("posters")
    duration_s: int | None = None
    formats: list[str] = field(default_factory=list)
    colours: list[str] = field(default_factory=list)
    name: str = ""  # the request in the person's words, short, without raw ids
    media: list[str] = field(default_factory=list)  # the media its nouns name
    listed: int = 1  # items of its enumeration (1: none)
    asks: bool = False  # put as a question


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word.lower()]


def requested(text: str) -> Requested:
    out = Requested()
    if m := _DURATION.search(text):
        out.duration_s = _number(m.group(1) or m.group(2))
    counted = [(_number(m.group(1)), _piece(m, text)) for m in _COUNT.finditer(text)]
    counted = [(n, word) for n, word in counted if n > 1]
    numbered = len(_NUMBERED.findall(text))
    if numbered > 1:
        counted.append((numbered, ""))
    if counted:
        out.count, out.piece = max(counted, key=lambda c: c[0])
    out.formats = list(dict.fromkeys(m.group(1) for m in _FORMAT.finditer(text)))
    out.colours = list(dict.fromkeys(m.group(0).lower() for m in _COLOUR.finditer(text)))
    out.name = work_name(text)
    out.media = [m for m, noun in _MEDIUM.items() if noun.search(text)]
    out.listed = len([p for p in _ITEM_SEP.split(text) if p.strip()])
    out.asks = bool(_ASKS.search(text))
    return out


def _piece(m: re.Match[str], text: str) -> str:
    """The counted word and, before a linking word, the one after ("short videos")."""
    after = _WORD.match(text, m.end())
    if after and after.group(1).lower() not in _LINKS:
        return f"{m.group(2)} {after.group(1)}"
    return m.group(2)


def work_name(text: str) -> str:
    """The person's own words for the work, without object ids, cut at a word boundary."""
    words = " ".join(_OBJECT.sub("", text).split()).strip(" .!?")
    if len(words) <= _NAME_LIMIT:
        return words
    return words[:_NAME_LIMIT].rsplit(" ", 1)[0] + " …"

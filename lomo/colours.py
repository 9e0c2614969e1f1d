"""The colour vocabulary that pictures are described and asked for in.

One list of colour names, each with the RGB values it stands for, and the English and
German words that name it or ask for a change (warmer, cooler, brighter, darker). The
simulator paints with it and the picture reader names what it sees with it, so a word in
a brief and a word in a description mean the same colour.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

RGB = tuple[int, int, int]

# The colour a name paints with comes first; the others are shades a reader still calls
# by that name. No paint value sits at 0 or 255, so a warmer, cooler, brighter or darker
# shift always has room to move.
PALETTE: dict[str, tuple[RGB, ...]] = {
    "red": ((200, 40, 40), (150, 25, 30), (230, 80, 70)),
    "orange": ((235, 130, 40), (250, 160, 80), (210, 100, 30)),
    "yellow": ((235, 205, 60), (250, 235, 120), (200, 180, 30)),
    "ochre": ((200, 150, 50), (175, 125, 40)),
    "brown": ((120, 75, 40), (90, 55, 30), (150, 100, 60)),
    "green": ((60, 150, 70), (30, 95, 45), (140, 200, 110)),
    "teal": ((30, 130, 130), (20, 90, 95), (90, 180, 175)),
    "blue": ((40, 90, 200), (25, 45, 120), (110, 160, 230)),
    "purple": ((120, 60, 160), (80, 35, 110), (170, 130, 210)),
    "pink": ((230, 130, 170), (245, 185, 205), (200, 70, 130)),
    "cream": ((240, 228, 195),),
    "white": ((245, 245, 245),),
    "grey": ((128, 128, 128), (80, 80, 80), (185, 185, 185)),
    "black": ((20, 20, 20),),
}
NAMES = tuple(PALETTE)
WARM = frozenset({"red", "orange", "yellow", "ochre", "brown", "pink", "cream"})
COOL = frozenset({"green", "teal", "blue", "purple"})

_WORDS: dict[str, tuple[str, ...]] = {
    "red": ("red", "scarlet", "crimson", "rot"),
    "orange": ("orange", "amber", "tangerine"),
    "yellow": ("yellow", "gold", "golden", "lemon", "gelb"),
    "ochre": ("ochre", "ocher", "mustard", "ocker", "senf", "senfgelb"),
    "brown": ("brown", "chocolate", "sepia", "braun"),
    "green": ("green", "olive", "grün", "gruen"),
    "teal": ("teal", "turquoise", "cyan", "petrol", "türkis", "tuerkis"),
    "blue": ("blue", "navy", "azure", "blau"),
    "purple": ("purple", "violet", "lilac", "lila", "violett"),
    "pink": ("pink", "magenta", "rosa"),
    "cream": ("cream", "beige", "ivory", "creme"),
    "white": ("white", "weiß", "weiss"),
    "grey": ("grey", "gray", "silver", "grau"),
    "black": ("black", "schwarz"),
}
# German adjective endings ("rote", "blauen", "grünes"); a word is a colour when it is one
# of the words above, or one of them with such an ending.
_ENDINGS = ("es", "em", "en", "er", "e", "farben", "farbene", "farbenen", "farbig")
_COLOUR_OF = {w: name for name, words in _WORDS.items() for w in words}
WARMER_WORDS = frozenset({"warm", "warmer", "warmth", "wärmer", "waermer", "warme", "warmen"})
COOLER_WORDS = frozenset(
    {"cool", "cooler", "cold", "colder", "kühl", "kühler", "kuehler", "kalt", "kälter"}
)
BRIGHTER_WORDS = frozenset(
    {"bright", "brighter", "light", "lighter", "hell", "heller", "helle", "hellere"}
)
DARKER_WORDS = frozenset({"dark", "darker", "dim", "dimmer", "dunkel", "dunkler", "dunkle"})
# German compounds: "hellblau" asks for blue and for light, "dunkelrot" for red and dark.
_PREFIXES = (("hell", 1), ("dunkel", -1))
_TOKEN = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class Wish:
    """What a text asks of a picture's colour: the colours it names (in order), and how
    many steps warmer (negative: cooler) and brighter (negative: darker)."""

    colours: tuple[str, ...] = ()
    warmer: int = 0
    brighter: int = 0


def words(text: str) -> list[str]:
    """The text's words, lower case, in NFC so a typed "ü" and a composed one agree."""
    return _TOKEN.findall(unicodedata.normalize("NFC", text).lower())


def colour_of(word: str) -> str | None:
    """The colour name a single word stands for, if it names one."""
    name = _COLOUR_OF.get(word)
    if name is not None:
        return name
    for ending in _ENDINGS:
        stem = word.removesuffix(ending)
        if stem != word and stem in _COLOUR_OF:
            return _COLOUR_OF[stem]
    return None


def wish(text: str) -> Wish:
    colours: list[str] = []
    warmer = brighter = 0
    for word in words(text):
        for prefix, step in _PREFIXES:
            rest = word.removeprefix(prefix)
            if rest != word and colour_of(rest):
                brighter += step
                word = rest
        name = colour_of(word)
        if name is not None and name not in colours:
            colours.append(name)
        warmer += (word in WARMER_WORDS) - (word in COOLER_WORDS)
        brighter += (word in BRIGHTER_WORDS) - (word in DARKER_WORDS)
    return Wish(tuple(colours), warmer, brighter)


def is_wish_word(word: str) -> bool:
    """A word that speaks about colour or light rather than about the subject."""
    if colour_of(word):
        return True
    if any(word.startswith(p) and colour_of(word[len(p) :]) for p, _ in _PREFIXES):
        return True
    return word in WARMER_WORDS | COOLER_WORDS | BRIGHTER_WORDS | DARKER_WORDS


def paint(name: str) -> RGB:
    """The RGB a colour name paints with."""
    return PALETTE[name][0]

"""What a picture really shows, read from its bytes: size, brightness, warmth and its
main colours in plain words, and whether it meets what a brief asked for.

Pure functions over bytes (PNG, JPEG, WebP, GIF's first frame), so the offline model and
the checks of a result share them. Brightness is the mean Rec. 601 luma and warmth the
mean red minus the mean blue, both on the 0-255 scale; colours are named with the
vocabulary of `lomo.colours`.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from PIL import Image

from lomo import colours
from workspace.errors import NotAPicture

# Measured on at most this many pixels: a box-filtered reduction keeps the means.
MEASURE_PIXELS = 1_000_000
# Colours are named on a thumbnail this wide and high at most.
NAME_SIDE = 96
# A colour is among the picture's colours from this share of its pixels on.
MIN_SHARE = 0.08
# The named colours describe a picture when they cover this share of it together.
MOSTLY = 0.6
# A comparative ("warmer", "darker") is met by a change of at least this much.
MIN_STEP = 4.0
# Without a picture to compare with, a comparative is met past these levels.
WARM_LEVEL = 20.0
COOL_LEVEL = -20.0
BRIGHT_LEVEL = 150.0
DARK_LEVEL = 100.0
_SIZE = re.compile(r"\b(\d{2,5})\s*[x×]\s*(\d{2,5})\b")
_PROTOS = [(name, rgb) for name, shades in colours.PALETTE.items() for rgb in shades]
_PROTO_RGB = np.array([rgb for _, rgb in _PROTOS], dtype=np.float64)


@dataclass(frozen=True)
class PictureProps:
    """A picture's measured properties; `colours` are (name, share) pairs, largest
    first, for every colour over `MIN_SHARE` of the picture."""

    width: int
    height: int
    brightness: float
    warmth: float
    colours: tuple[tuple[str, float], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.colours)

    def as_dict(self) -> dict[str, object]:
        """Plain JSON: for a tool result, an event or an activity's output."""
        return {
            "width": self.width,
            "height": self.height,
            "brightness": self.brightness,
            "warmth": self.warmth,
            "colours": [{"name": n, "share": s} for n, s in self.colours],
        }


@dataclass(frozen=True)
class Verdict:
    """Whether a picture meets a brief; `off` says, in words, what does not."""

    ok: bool
    off: tuple[str, ...] = ()


def _decode(data: bytes) -> tuple[Image.Image, tuple[int, int]]:
    """The picture in RGB, and its size as stored (a large JPEG is decoded smaller)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
            size = img.size
            side = int(np.sqrt(MEASURE_PIXELS))
            img.draft("RGB", (side, side))
            img.load()
    except (OSError, ValueError, Image.DecompressionBombWarning, Image.DecompressionBombError) as e:
        raise NotAPicture(f"not a picture that can be read: {e}") from e
    if img.mode in ("RGBA", "LA", "PA") or "transparency" in img.info:
        # Transparent parts are seen on a white page.
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB"), size
    return img.convert("RGB"), size


def name_pixels(pixels: np.ndarray) -> list[str]:
    """The colour name of each RGB pixel (N x 3): the nearest shade, by a distance that
    weighs red and blue by how red the pair is (the "redmean" approximation)."""
    return [_PROTOS[i][0] for i in _nearest_shades(pixels.reshape(-1, 3))]


def _nearest_shades(pixels: np.ndarray) -> np.ndarray:
    px = pixels.reshape(-1, 1, 3).astype(np.float64)
    diff = px - _PROTO_RGB[None, :, :]
    rmean = (px[..., 0] + _PROTO_RGB[None, :, 0]) / 2
    dist = (
        (2 + rmean / 256) * diff[..., 0] ** 2
        + 4 * diff[..., 1] ** 2
        + (2 + (255 - rmean) / 256) * diff[..., 2] ** 2
    )
    return np.asarray(dist.argmin(axis=1))


def _shares(img: Image.Image) -> tuple[tuple[str, float], ...]:
    thumb = img.copy()
    thumb.thumbnail((NAME_SIDE, NAME_SIDE), Image.Resampling.NEAREST)
    pixels = np.asarray(thumb).reshape(-1, 3)
    # A picture has far fewer distinct colours than pixels: each is named once.
    packed = pixels.astype(np.uint32) @ np.array([1 << 16, 1 << 8, 1], dtype=np.uint32)
    distinct, per_pixel = np.unique(packed, return_inverse=True)
    rgb = np.stack([distinct >> 16, (distinct >> 8) & 0xFF, distinct & 0xFF], axis=1)
    shade = _nearest_shades(rgb)[per_pixel.reshape(-1)]
    counts: dict[str, int] = {}
    for i, n in enumerate(np.bincount(shade, minlength=len(_PROTOS)).tolist()):
        if n:
            counts[_PROTOS[i][0]] = counts.get(_PROTOS[i][0], 0) + n
    total = len(pixels)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], colours.NAMES.index(kv[0])))
    return tuple((n, round(c / total, 3)) for n, c in ranked if c / total >= MIN_SHARE)


def read(data: bytes) -> PictureProps:
    """Measure a picture from its file's bytes; `NotAPicture` when they are none."""
    img, (width, height) = _decode(data)
    small = img
    factor = int(np.ceil(np.sqrt(img.width * img.height / MEASURE_PIXELS)))
    if factor > 1:
        small = img.reduce(factor)
    px = np.asarray(small, dtype=np.float64)
    r, g, b = px[..., 0].mean(), px[..., 1].mean(), px[..., 2].mean()
    return PictureProps(
        width=width,
        height=height,
        brightness=round(float(0.299 * r + 0.587 * g + 0.114 * b), 2),
        warmth=round(float(r - b), 2),
        colours=_shares(img),
    )


def _tone(props: PictureProps) -> str:
    if props.warmth >= WARM_LEVEL:
        return "warm "
    if props.warmth <= COOL_LEVEL:
        return "cool "
    return ""


def _light(props: PictureProps) -> str:
    if props.brightness >= BRIGHT_LEVEL:
        return "bright"
    if props.brightness <= DARK_LEVEL:
        return "dark"
    return "mid-tone"


def describe(props: PictureProps) -> str:
    """One line, e.g. "1024×768, mostly warm orange and brown, bright"."""
    size, tone, light = f"{props.width}×{props.height}", _tone(props), _light(props)
    names = list(props.names[:3])
    listed = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    if sum(share for _, share in props.colours[:3]) < MOSTLY:
        among = f", most of all {listed}" if names else ""
        return f"{size}, {tone}many colours{among}, {light}"
    return f"{size}, mostly {tone}{listed}, {light}"


def compare(before: PictureProps, after: PictureProps) -> dict[str, object]:
    """How `after` differs from `before`: warmth and brightness deltas (after minus
    before), the colours it gained and lost, and whether the size changed."""
    return {
        "warmth": round(after.warmth - before.warmth, 2),
        "brightness": round(after.brightness - before.brightness, 2),
        "colours_gained": [n for n in after.names if n not in before.names],
        "colours_lost": [n for n in before.names if n not in after.names],
        "size_changed": (before.width, before.height) != (after.width, after.height),
    }


# A colour right after one of these is not asked for ("less red", "ohne Blau").
_NEGATIONS = frozenset({"no", "not", "without", "less", "kein", "keine", "ohne", "weniger"})


def _asked_colours(words: list[str]) -> list[str]:
    asked: list[str] = []
    for i, word in enumerate(words):
        named = colours.wish(word).colours
        if named and (i == 0 or words[i - 1] not in _NEGATIONS) and named[0] not in asked:
            asked.append(named[0])
    return asked


def _shift(what: str, wanted: int, value: float, before: float | None) -> str | None:
    """What is off about one measure (warmth or brightness) a brief asks to move:
    `wanted` above 0 up, below 0 down; against `before`, else against absolute levels."""
    up, down = {"warmth": ("warmer", "cooler"), "brightness": ("brighter", "darker")}[what]
    word = up if wanted > 0 else down
    if before is not None:
        delta = value - before
        if delta * wanted >= MIN_STEP:
            return None
        return f"not {word}: {what} went from {before:.0f} to {value:.0f}"
    levels = {"warmth": (WARM_LEVEL, COOL_LEVEL), "brightness": (BRIGHT_LEVEL, DARK_LEVEL)}
    level = levels[what][0] if wanted > 0 else levels[what][1]
    if (value - level) * wanted >= 0:
        return None
    return f"not {word.removesuffix('er')}: {what} is {value:.0f}"


def matches(
    brief: str | Iterable[str], props: PictureProps, before: PictureProps | None = None
) -> Verdict:
    """Whether a picture meets the colour, light and size words of a brief: colour names
    must be among its colours; warmer/cooler and brighter/darker must show against
    `before` when given, else as a warm, cool, bright or dark picture; "1024x768" its
    size. `off` names each miss in words."""
    text = brief if isinstance(brief, str) else " ".join(brief)
    words = colours.words(text)
    wish = colours.wish(text)
    off: list[str] = []
    seen = describe(props).split(", ", 1)[1].removeprefix("mostly ")
    for name in _asked_colours(words):
        if name not in props.names:
            off.append(f"no {name} to be seen ({seen})")
    asks = (
        ("warmth", wish.warmer, props.warmth, before.warmth if before else None),
        ("brightness", wish.brighter, props.brightness, before.brightness if before else None),
    )
    for what, wanted, value, was in asks:
        miss = _shift(what, wanted, value, was) if wanted else None
        off += [miss] if miss else []
    for w, h in _SIZE.findall(text):
        if (int(w), int(h)) != (props.width, props.height):
            off.append(f"{props.width}×{props.height}, not {w}×{h}")
    return Verdict(ok=not off, off=tuple(off))

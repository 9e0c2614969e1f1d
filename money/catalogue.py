"""The generation model catalogue: what each model takes, allows, produces and costs.

Requests are validated against it before anything is spent; the main thread answers
capability questions from it. Prices are in cents.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from lomo.errors import InvalidInput


@dataclass(frozen=True)
class ModelSpec:
    name: str
    kind: str  # image | video | audio | 3d
    resolutions: tuple[str, ...] = ()
    durations_s: tuple[int, int] | None = None  # inclusive range
    reference_image: bool = False
    output: str = ""
    price_cents: int = 0
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"{self.name} ({self.kind}, {self.output}, {self.price_cents / 100:.2f} EUR)"]
        if self.resolutions:
            parts.append("resolutions " + ", ".join(self.resolutions))
        if self.durations_s:
            parts.append(f"durations {self.durations_s[0]}-{self.durations_s[1]} s")
        parts.append("reference image: " + ("yes" if self.reference_image else "no"))
        return "; ".join(parts)


CATALOGUE: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec(
            "sim-image-1", "image", ("512x512", "1024x1024", "1024x768"), None, True, "PNG", 4
        ),
        ModelSpec("sim-video-1", "video", ("640x360", "1280x720"), (2, 10), True, "MP4", 40),
        ModelSpec("sim-audio-1", "audio", (), (1, 30), False, "WAV", 5),
        ModelSpec("sim-3d-1", "3d", (), None, True, "GLB", 25),
    )
}
DEFAULT_MODEL = {m.kind: m.name for m in reversed(list(CATALOGUE.values()))}


def cancel_charge(price_cents: int, progress: float) -> int:
    """What a cancelled job costs (docs/architecture.md#cancelling-a-job): nothing before
    the upstream started it (progress 0), else the share of the price its progress
    reached, rounded up to whole cents and never more than the price."""
    if progress <= 0:
        return 0
    return min(price_cents, max(1, math.ceil(price_cents * min(progress, 1.0))))


def catalogue_text() -> str:
    return "\n".join(f"- {m.describe()}" for m in CATALOGUE.values())


def validate_request(kind: str, args: dict[str, Any]) -> ModelSpec:
    """Refuse a request the model cannot do, naming the constraint."""
    name = str(args.get("model") or DEFAULT_MODEL.get(kind, ""))
    spec = CATALOGUE.get(name)
    if spec is None or spec.kind != kind:
        known = ", ".join(m.name for m in CATALOGUE.values() if m.kind == kind)
        raise InvalidInput(f"no {kind} model {name!r}; available: {known}")
    if "width" in args or "height" in args:
        res = f"{args.get('width')}x{args.get('height')}"
        if spec.resolutions and res not in spec.resolutions:
            raise InvalidInput(f"{name} supports {', '.join(spec.resolutions)}, not {res}")
    if "duration_s" in args and spec.durations_s:
        lo, hi = spec.durations_s
        if not lo <= float(args["duration_s"]) <= hi:
            raise InvalidInput(f"{name} makes {lo}-{hi} s clips, not {args['duration_s']} s")
    if args.get("reference_object_id") and not spec.reference_image:
        raise InvalidInput(f"{name} takes no reference image")
    return spec

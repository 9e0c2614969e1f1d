"""Warmth and brightness of the simulator's pictures for pairs of prompts, read back
from the PNG bytes with workspace/picture.py.

    .venv/bin/python bench/sim_pictures.py

Warmth is mean red minus mean blue and brightness the mean luma, both 0-255. The last
pair is a revision: the second job names the first job's file as its `reference_url`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from sim import render
from workspace.picture import describe, read

SIZE = {"width": 1024, "height": 768}
PAIRS = [
    ("a fox in the snow", "a fox in the snow, a bit warmer"),
    ("a fox in the snow", "a fox in the snow, darker"),
    ("a blue fox", "a blue fox, warmer"),
    ("ein Leuchtturm am Meer", "ein Leuchtturm am Meer, etwas wärmer"),
    ("ein grünes Feld", "ein grünes Feld, dunkler"),
    (
        "Retro brand poster, draft 1, sunset orange: a cafe",
        "The chosen retro poster, a bit warmer: more orange and red",
    ),
]
REVISION = ("Retro brand poster, draft 2, teal and cream: a cafe", "The chosen poster, warmer")


def _line(label: str, path: Path) -> str:
    props = read(path.read_bytes())
    return f"{label:62} {props.warmth:8.2f} {props.brightness:8.2f}  {describe(props)}"


def main() -> None:
    out = Path(tempfile.mkdtemp(prefix="lomo-sim-pictures-"))
    print(f"{'prompt':62} {'warmth':>8} {'bright':>8}  described")
    for i, pair in enumerate(PAIRS):
        for j, prompt in enumerate(pair):
            path = render.render("image", {"prompt": prompt, **SIZE}, out, f"p{i}{j}")
            print(_line(repr(prompt), path))
        print()
    source = render.render("image", {"prompt": REVISION[0], **SIZE}, out, "source")
    params = {"prompt": REVISION[1], "reference_url": f"/files/{source.name}", **SIZE}
    revised = render.render("image", params, out, "revised")
    print(_line(f"{REVISION[0]!r} (source)", source))
    print(_line(f"{REVISION[1]!r} (revision of it)", revised))


if __name__ == "__main__":
    main()

"""Render small but real output files for each job kind.

Everything here is synchronous and CPU-bound; callers run it in a worker thread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import struct
import unicodedata
import wave
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from lomo import colours

logger = logging.getLogger(__name__)

KINDS = ("image", "video", "audio", "3d")
RGB = tuple[int, int, int]
# One step warmer moves every pixel's red up and blue down by this much (0-255 scale).
WARM_STEP = 30
# One step brighter keeps this share of the distance to white; darker, of the brightness.
LIGHT_KEEP = 0.6
DARK_KEEP = 0.6
# How much of a revision is the new prompt's colours (the rest is the source picture).
BLEND = 0.5
SUBJECT_WORDS = 6
_WORD = re.compile(r"[^\W\d_]+")
# Colours a prompt without colour words is painted in, picked by its subject.
_CHROMATIC = ("red", "orange", "yellow", "ochre", "green", "teal", "blue", "purple", "pink")
_FILLER = frozenset(
    """a an the of in on at to for with and or but by from as into is are be this that these
    those it its my our your their me us make made making generate create draw paint show
    give render image images picture pictures photo photos please bit little
    more less very much some same again version variant variants style
    ein eine einen einem einer eines der die das den dem des und oder mit von im in auf für
    am an beim vom ins zum über unter vor hinter neben
    zu zum zur aus als ist sind bitte mach mache erstelle erzeuge zeichne male zeig bild
    bilder foto fotos mehr weniger sehr noch mal wieder variante
    etwas bisschen""".split()
)


def _prompt(params: dict[str, Any]) -> str:
    return str(params.get("prompt", ""))


def _colour(text: str) -> tuple[int, int, int]:
    """Stable colour derived from the prompt so outputs differ per prompt."""
    digest = hashlib.sha256(text.encode()).digest()
    return digest[0], digest[1], digest[2]


def _int_param(params: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    try:
        value = int(params.get(key, default))
    except (TypeError, ValueError):
        value = default
    return max(lo, min(hi, value))


def subject(prompt: str) -> str:
    """The prompt's words about what is shown: without filler, colour and light words."""
    text = unicodedata.normalize("NFC", prompt)
    kept = [
        w
        for w in _WORD.findall(text)
        if w.lower() not in _FILLER and not colours.is_wish_word(w.lower())
    ]
    return " ".join(kept[:SUBJECT_WORDS])


def _names(wish: colours.Wish, subj: str) -> list[str]:
    """The colours to paint with: those the prompt names, else one picked by the subject
    alone, so "a fox" and "a fox, warmer" start from the same colour."""
    if wish.colours:
        return list(wish.colours)
    digest = hashlib.sha256(subj.encode()).digest()
    return [_CHROMATIC[digest[0] % len(_CHROMATIC)]]


def _layout(img: Image.Image, names: list[str]) -> tuple[int, int, int, int]:
    """Paint the background in the first colour, a central shape in the second, a banner
    in the third (shades of the first when fewer are named); return the banner's box."""
    width, height = img.size
    draw = ImageDraw.Draw(img)
    first = colours.PALETTE[names[0]]
    shape = colours.paint(names[1]) if len(names) > 1 else first[1 % len(first)]
    banner = colours.paint(names[min(2, len(names) - 1)]) if len(names) > 1 else first[-1]
    draw.rectangle((0, 0, width, height), fill=first[0])
    draw.ellipse((width // 4, height // 6, 3 * width // 4, 2 * height // 3), fill=shape)
    box = (0, height * 4 // 5, width, height)
    draw.rectangle(box, fill=banner)
    extra = names[3:]
    for i, name in enumerate(extra):
        # Colours beyond the third share a strip along the top.
        x0, x1 = i * width // len(extra), (i + 1) * width // len(extra)
        draw.rectangle((x0, 0, x1, max(1, height // 12)), fill=colours.paint(name))
    return box


def shade(pixels: np.ndarray, wish: colours.Wish) -> np.ndarray:
    """Shift RGB pixels (float, 0-255) by the wish: warmer moves red up and blue down,
    brighter moves toward white, darker toward black."""
    out = pixels.astype(np.float64)
    warm = max(-2, min(2, wish.warmer))
    out[..., 0] += WARM_STEP * warm
    out[..., 2] -= WARM_STEP * warm
    out = np.clip(out, 0, 255)
    light = max(-2, min(2, wish.brighter))
    if light > 0:
        out = 255 - (255 - out) * LIGHT_KEEP**light
    elif light < 0:
        out = out * DARK_KEEP ** (-light)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _source(params: dict[str, Any], out_dir: Path, size: tuple[int, int]) -> np.ndarray | None:
    """The picture a job revises: ``reference_url`` naming one of this simulator's own
    files (only its file name is used, so nothing outside ``out_dir`` is read)."""
    url = params.get("reference_url")
    if not isinstance(url, str) or not url:
        return None
    path = out_dir / url.rstrip("/").rsplit("/", 1)[-1]
    if path.suffix.lower() not in (".png", ".jpg", ".jpeg", ".webp") or not path.is_file():
        return None
    try:
        with Image.open(path) as src:
            return np.asarray(src.convert("RGB").resize(size), dtype=np.float64)
    except OSError:
        logger.warning("reference %s unreadable; rendering without it", path.name)
        return None


def _ink(pixels: np.ndarray, box: tuple[int, int, int, int]) -> tuple[int, int, int]:
    x0, y0, x1, y1 = box
    region = pixels[y0:y1, x0:x1].reshape(-1, 3).mean(axis=0)
    luma = 0.299 * region[0] + 0.587 * region[1] + 0.114 * region[2]
    return (15, 15, 15) if luma > 128 else (245, 245, 245)


def _write(img: Image.Image, box: tuple[int, int, int, int], text: str, ink: RGB) -> None:
    """Draw the subject centred in the banner, as large as fits."""
    x0, y0, x1, y1 = box
    draw = ImageDraw.Draw(img)
    size = max(6, (y1 - y0) * 11 // 20)
    font = ImageFont.load_default(size=size)
    while size > 6 and draw.textlength(text, font=font) > (x1 - x0) * 0.92:
        size = max(6, size * 4 // 5)
        font = ImageFont.load_default(size=size)
    draw.text(((x0 + x1) / 2, (y0 + y1) / 2), text, fill=ink, font=font, anchor="mm")


def picture(prompt: str, width: int, height: int, source: np.ndarray | None = None) -> Image.Image:
    """The picture for a prompt: its colour words set the colours, warmer/cooler and
    brighter/darker shift them, its subject is written in the banner. With a ``source``
    (height x width x 3) the prompt's shifts apply to that picture, blended with the
    colours the prompt names."""
    wish = colours.wish(prompt)
    subj = subject(prompt)
    img = Image.new("RGB", (width, height))
    box = _layout(img, _names(wish, subj))
    pixels = np.asarray(img, dtype=np.float64)
    if source is not None:
        pixels = source if not wish.colours else (1 - BLEND) * source + BLEND * pixels
    out = shade(pixels, wish)
    img = Image.fromarray(out, "RGB")
    _write(img, box, subj or "(no subject)", _ink(out, box))
    return img


def render_image(params: dict[str, Any], out_dir: Path, stem: str) -> Path:
    width = _int_param(params, "width", 512, 8, 4096)
    height = _int_param(params, "height", 512, 8, 4096)
    img = picture(_prompt(params), width, height, _source(params, out_dir, (width, height)))
    path = out_dir / f"{stem}.png"
    img.save(path, format="PNG")
    return path


def _video_frames(params: dict[str, Any], size: int, fps: int) -> list[np.ndarray]:
    try:
        duration = float(params.get("duration_s", 2))
    except (TypeError, ValueError):
        duration = 2.0
    n = max(1, min(int(duration * fps), 30 * fps))
    base = np.asarray(picture(_prompt(params), size, size))
    bar = tuple(255 - int(c) for c in base[size // 2, 2])
    frames = []
    for i in range(n):
        frame = base.copy()
        # A moving bar makes the clip visibly animated.
        x = (i * size // n) % size
        frame[: size * 4 // 5, x : x + max(2, size // 32)] = bar
        frames.append(frame)
    return frames


def render_video(params: dict[str, Any], out_dir: Path, stem: str) -> Path:
    size, fps = 128, 8
    frames = _video_frames(params, size, fps)
    path = out_dir / f"{stem}.mp4"
    try:
        import imageio.v2 as iio

        writer = iio.get_writer(
            str(path), format="FFMPEG", mode="I", fps=fps, codec="libx264", macro_block_size=16
        )
        try:
            for frame in frames:
                writer.append_data(frame)
        finally:
            writer.close()
        if path.stat().st_size > 0:
            return path
    except Exception:  # any ffmpeg problem -> GIF fallback, the point is a real file
        logger.exception("ffmpeg video render failed; falling back to GIF")
    path.unlink(missing_ok=True)
    gif = out_dir / f"{stem}.gif"
    images = [Image.fromarray(f) for f in frames]
    images[0].save(
        gif, format="GIF", save_all=True, append_images=images[1:], duration=1000 // fps, loop=0
    )
    return gif


def render_audio(params: dict[str, Any], out_dir: Path, stem: str) -> Path:
    try:
        duration = max(0.1, min(float(params.get("duration_s", 1)), 30.0))
    except (TypeError, ValueError):
        duration = 1.0
    rate = 16000
    # Pitch from the prompt hash so different prompts sound different.
    freq = 220 + _colour(_prompt(params))[0] * 2
    n = int(rate * duration)
    samples = b"".join(
        struct.pack("<h", int(12000 * math.sin(2 * math.pi * freq * i / rate))) for i in range(n)
    )
    path = out_dir / f"{stem}.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples)
    return path


# A cube's six faces: the outward normal and two edge directions spanning the face.
_FACES = (
    ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
    ((-1, 0, 0), (0, 0, 1), (0, 1, 0)),
    ((0, 1, 0), (0, 0, 1), (1, 0, 0)),
    ((0, -1, 0), (1, 0, 0), (0, 0, 1)),
    ((0, 0, 1), (1, 0, 0), (0, 1, 0)),
    ((0, 0, -1), (0, 1, 0), (1, 0, 0)),
)
_ARRAY_BUFFER, _ELEMENT_ARRAY_BUFFER = 34962, 34963
_FLOAT, _UNSIGNED_SHORT = 5126, 5123


def _linear(c: int) -> float:
    """An sRGB byte as the linear value glTF's baseColorFactor is given in."""
    v = c / 255
    return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4


def _cube_mesh() -> tuple[list[float], list[float], list[int]]:
    """A 2 x 2 x 2 cube with flat faces: 4 vertices per face (so each keeps its own
    normal), two counter-clockwise triangles each."""
    positions: list[float] = []
    normals: list[float] = []
    indices: list[int] = []
    for n, u, v in _FACES:
        base = len(positions) // 3
        for su, sv in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
            positions += [n[i] + su * u[i] + sv * v[i] for i in range(3)]
            normals += [float(x) for x in n]
        indices += [base, base + 1, base + 2, base, base + 2, base + 3]
    return positions, normals, indices


def glb(name: str, rgb: RGB) -> bytes:
    """A binary glTF 2.0 file: one cube mesh in one colour (a real model any glTF viewer
    loads: positions with their bounds, normals, indices, a PBR material)."""
    positions, normals, indices = _cube_mesh()
    pos = struct.pack(f"<{len(positions)}f", *positions)
    nor = struct.pack(f"<{len(normals)}f", *normals)
    idx = struct.pack(f"<{len(indices)}H", *indices)
    binary = pos + nor + idx
    binary += b"\0" * (-len(binary) % 4)
    count = len(positions) // 3
    doc = {
        "asset": {"version": "2.0", "generator": "lomo sim"},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0, "name": name}],
        "meshes": [
            {
                "name": name,
                "primitives": [
                    {"attributes": {"POSITION": 0, "NORMAL": 1}, "indices": 2, "material": 0}
                ],
            }
        ],
        "materials": [
            {
                "pbrMetallicRoughness": {
                    "baseColorFactor": [*(_linear(c) for c in rgb), 1.0],
                    "metallicFactor": 0.0,
                    "roughnessFactor": 0.7,
                }
            }
        ],
        "buffers": [{"byteLength": len(binary)}],
        "bufferViews": [
            {"buffer": 0, "byteOffset": 0, "byteLength": len(pos), "target": _ARRAY_BUFFER},
            {"buffer": 0, "byteOffset": len(pos), "byteLength": len(nor), "target": _ARRAY_BUFFER},
            {
                "buffer": 0,
                "byteOffset": len(pos) + len(nor),
                "byteLength": len(idx),
                "target": _ELEMENT_ARRAY_BUFFER,
            },
        ],
        "accessors": [
            {
                "bufferView": 0,
                "componentType": _FLOAT,
                "count": count,
                "type": "VEC3",
                "min": [-1.0, -1.0, -1.0],
                "max": [1.0, 1.0, 1.0],
            },
            {"bufferView": 1, "componentType": _FLOAT, "count": count, "type": "VEC3"},
            {
                "bufferView": 2,
                "componentType": _UNSIGNED_SHORT,
                "count": len(indices),
                "type": "SCALAR",
            },
        ],
    }
    text = json.dumps(doc, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 4)
    chunks = struct.pack("<I4s", len(text), b"JSON") + text
    chunks += struct.pack("<I4s", len(binary), b"BIN\0") + binary
    return struct.pack("<4sII", b"glTF", 2, 12 + len(chunks)) + chunks


def render_3d(params: dict[str, Any], out_dir: Path, stem: str) -> Path:
    """The prompt's subject as a cube in the prompt's first colour, as a GLB."""
    prompt = _prompt(params)
    subj = subject(prompt)
    rgb = colours.paint(_names(colours.wish(prompt), subj)[0])
    path = out_dir / f"{stem}.glb"
    path.write_bytes(glb(subj or "cube", rgb))
    return path


def render(kind: str, params: dict[str, Any], out_dir: Path, stem: str) -> Path:
    """Write the output file for ``kind`` into ``out_dir`` and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if kind == "image":
        return render_image(params, out_dir, stem)
    if kind == "video":
        return render_video(params, out_dir, stem)
    if kind == "audio":
        return render_audio(params, out_dir, stem)
    if kind == "3d":
        return render_3d(params, out_dir, stem)
    raise ValueError(f"unknown kind: {kind}")

"""Render small but real output files for each job kind.

Everything here is synchronous and CPU-bound; callers run it in a worker thread.
"""

from __future__ import annotations

import hashlib
import logging
import math
import struct
import wave
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

logger = logging.getLogger(__name__)

KINDS = ("image", "video", "audio", "3d")


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


def render_image(params: dict[str, Any], out_dir: Path, stem: str) -> Path:
    width = _int_param(params, "width", 512, 8, 4096)
    height = _int_param(params, "height", 512, 8, 4096)
    prompt = _prompt(params)
    bg = _colour(prompt)
    img = Image.new("RGB", (width, height), bg)
    draw = ImageDraw.Draw(img)
    fg = tuple(255 - c for c in bg)
    draw.ellipse((width // 4, height // 4, 3 * width // 4, 3 * height // 4), outline=fg, width=3)
    draw.text((8, 8), prompt[:80] or "(no prompt)", fill=fg)
    path = out_dir / f"{stem}.png"
    img.save(path, format="PNG")
    return path


def _video_frames(params: dict[str, Any], size: int, fps: int) -> list[np.ndarray]:
    try:
        duration = float(params.get("duration_s", 2))
    except (TypeError, ValueError):
        duration = 2.0
    n = max(1, min(int(duration * fps), 30 * fps))
    r, g, b = _colour(_prompt(params))
    frames = []
    for i in range(n):
        frame = np.zeros((size, size, 3), dtype=np.uint8)
        frame[:, :] = (r, g, b)
        # A moving bar makes the clip visibly animated.
        x = (i * size // n) % size
        frame[:, x : x + max(4, size // 16)] = (255 - r, 255 - g, 255 - b)
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


def render_3d(params: dict[str, Any], out_dir: Path, stem: str) -> Path:
    s = 1.0
    verts = [(x, y, z) for x in (-s, s) for y in (-s, s) for z in (-s, s)]
    faces = [(1, 3, 4, 2), (5, 6, 8, 7), (1, 2, 6, 5), (3, 7, 8, 4), (1, 5, 7, 3), (2, 4, 8, 6)]
    lines = [f"# lomo sim cube: {_prompt(params)[:80]}", "o cube"]
    lines += [f"v {x:.1f} {y:.1f} {z:.1f}" for x, y, z in verts]
    lines += ["f " + " ".join(str(i) for i in f) for f in faces]
    path = out_dir / f"{stem}.obj"
    path.write_text("\n".join(lines) + "\n")
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

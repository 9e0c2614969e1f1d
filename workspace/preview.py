"""What a model is shown of a work object's bytes: pictures downscaled, and a described
stand-in for media it cannot see (a video's first frame and its length, an audio clip's
length and loudness over time, a 3D model's size).

Pure functions of the bytes: the same object version always gives the same preview, so a
picture repeated in later steps' contexts stays byte for byte the same (the prompt cache
keeps it).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import struct
import wave
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import ObjectVersion, WorkObject
from workspace.blobs import BlobStore
from workspace.media import base_type

PICTURE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
# The runtime lines before a picture in a context: what the picture is (any model reads
# them; the offline model finds the pictures it reviews by them).
ATTACHED_LABEL = "[runtime] attached:"
RESULT_LABEL = "[runtime] the result to look at:"
BEFORE_LABEL = "[runtime] the picture it revised:"


@dataclass(frozen=True, slots=True)
class Preview:
    object_id: str
    version: int
    note: str  # what the model reads beside (or instead of) the picture
    media_type: str = ""  # the picture's type; "" when there is no picture
    width: int = 0
    height: int = 0
    data: str = ""  # base64

    @property
    def size(self) -> int:
        return len(self.data)

    def view(self) -> dict[str, object]:
        """What `GET /v1/tasks/{id}/context` lists of a shown picture."""
        return {
            "object_id": self.object_id,
            "version": self.version,
            "media_type": self.media_type,
            "width": self.width,
            "height": self.height,
        }


def preview(
    object_id: str, version: int, name: str, media_type: str, data: bytes, max_side: int
) -> Preview:
    kind = base_type(media_type)
    label = f'"{name}" ({object_id} v{version})'
    try:
        if kind in PICTURE_TYPES:
            return _picture(object_id, version, f"Picture {label}:", _open(data), max_side)
        if kind.startswith("video/"):
            return _video(object_id, version, label, data, max_side)
        if kind.startswith("audio/"):
            return Preview(object_id, version, f"Audio {label}: {_audio_note(data)}")
        if kind == "model/obj" or name.lower().endswith(".obj"):
            return Preview(object_id, version, f"3D model {label}: {_obj_note(data)}")
        if kind == "model/gltf-binary":
            return Preview(object_id, version, f"3D model {label}: {_glb_note(data)}")
    except (
        UnidentifiedImageError,
        OSError,
        ValueError,
        KeyError,
        TypeError,
        wave.Error,
        struct.error,
    ) as e:
        return Preview(object_id, version, f"{label}: {media_type}, unreadable ({e})")
    return Preview(object_id, version, f"{label}: {media_type}, {len(data)} bytes")


def _open(data: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(data))
    img.seek(0)  # an animation's first frame
    return img


def _picture(object_id: str, version: int, note: str, img: Image.Image, max_side: int) -> Preview:
    img = img.convert("RGB")
    scale = min(1.0, max_side / max(img.size))
    if scale < 1.0:
        size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
        img = img.resize(size, Image.Resampling.LANCZOS)
    out = io.BytesIO()
    img.save(out, format="PNG", optimize=False)  # no timestamps: the same bytes every time
    data = base64.b64encode(out.getvalue()).decode()
    return Preview(object_id, version, note, "image/png", img.width, img.height, data)


def _video(object_id: str, version: int, label: str, data: bytes, max_side: int) -> Preview:
    """The first frame as the picture, the clip's length and size in words."""
    try:
        img = _open(data)  # an animated GIF
        frames = getattr(img, "n_frames", 1)
        seconds = frames * img.info.get("duration", 100) / 1000
        about = f"{seconds:.1f} s, {frames} frames, {img.width}x{img.height}"
    except UnidentifiedImageError:
        import imageio.v3 as iio

        meta = iio.immeta(data, extension=".mp4")
        first = iio.imread(data, index=0, extension=".mp4")
        img = Image.fromarray(first)
        seconds = float(meta.get("duration") or 0)
        about = f"{seconds:.1f} s, {img.width}x{img.height}"
    note = f"Video {label}: {about}; its first frame:"
    return _picture(object_id, version, note, img, max_side)


def _audio_note(data: bytes) -> str:
    with wave.open(io.BytesIO(data)) as w:
        rate, n, width, channels = (
            w.getframerate(),
            w.getnframes(),
            w.getsampwidth(),
            w.getnchannels(),
        )
        frames = w.readframes(n)
    seconds = n / rate if rate else 0.0
    if width != 2 or n == 0:
        return f"{seconds:.1f} s, {rate} Hz"
    samples = struct.unpack(f"<{len(frames) // 2}h", frames)[::channels]
    return f"{seconds:.1f} s, {rate} Hz, loudness over time {_loudness(samples)}"


def _loudness(samples: tuple[int, ...], parts: int = 10) -> str:
    """RMS in `parts` slices, as a bar of levels 0-9."""
    size = max(1, len(samples) // parts)
    levels = []
    for i in range(0, size * parts, size):
        chunk = samples[i : i + size] or (0,)
        rms = math.sqrt(sum(s * s for s in chunk) / len(chunk)) / 32768
        levels.append(str(min(9, round(rms * 9 / 0.7))))
    return "".join(levels)


def _obj_note(data: bytes) -> str:
    verts = [
        tuple(float(v) for v in line.split()[1:4])
        for line in data.decode(errors="replace").splitlines()
        if line.startswith("v ")
    ]
    faces = sum(1 for line in data.decode(errors="replace").splitlines() if line.startswith("f "))
    if not verts:
        return "no vertices"
    lo = [min(v[i] for v in verts) for i in range(3)]
    hi = [max(v[i] for v in verts) for i in range(3)]
    box = " x ".join(f"{h - low:.2f}" for low, h in zip(lo, hi, strict=True))
    return f"{len(verts)} vertices, {faces} faces, bounding box {box}"


def _glb_note(data: bytes) -> str:
    """A binary glTF's meshes, vertices, triangles and bounds, read from its JSON chunk
    (the accessors' declared min/max; the binary chunk is not decoded)."""
    magic, version, _ = struct.unpack_from("<4sII", data, 0)
    length, kind = struct.unpack_from("<I4s", data, 12)
    if magic != b"glTF" or version != 2 or kind != b"JSON":
        raise ValueError("not a glTF 2.0 binary")
    doc = json.loads(data[20 : 20 + length])
    accessors = doc.get("accessors", [])
    verts = tris = 0
    lo, hi = [math.inf] * 3, [-math.inf] * 3
    for mesh in doc.get("meshes", []):
        for prim in mesh.get("primitives", []):
            pos = accessors[prim["attributes"]["POSITION"]]
            verts += pos["count"]
            tris += (
                accessors[prim["indices"]]["count"] if "indices" in prim else pos["count"]
            ) // 3
            lo = [min(a, b) for a, b in zip(lo, pos.get("min", lo), strict=True)]
            hi = [max(a, b) for a, b in zip(hi, pos.get("max", hi), strict=True)]
    if not verts:
        return "no vertices"
    box = " x ".join(f"{h - low:.2f}" for low, h in zip(lo, hi, strict=True))
    meshes = len(doc.get("meshes", []))
    return f"{meshes} mesh(es), {verts} vertices, {tris} triangles, bounding box {box}"


@dataclass(frozen=True, slots=True)
class PreviewBound:
    """At most `count` previews, `data_bytes` of base64 in all, pictures fit in `max_side`."""

    count: int
    data_bytes: int
    max_side: int


async def load_previews(
    session: AsyncSession, store: BlobStore, user_id: str, ids: list[str], bound: PreviewBound
) -> dict[str, Preview]:
    """Previews of the person's live objects among `ids`, in order, while the bound holds
    (one that would break it is skipped, a smaller one after it may still fit). Downscaling
    is CPU work: it runs in a thread, off the event loop."""
    out: dict[str, Preview] = {}
    used = 0
    for oid in ids:
        if len(out) >= bound.count:
            break
        row = await _current(session, user_id, oid)
        if row is None:
            continue  # deleted, or not the person's: never shown
        obj, ver = row
        data = await store.get(ver.blob_path) if ver.blob_path else b""
        media_type = ver.media_type or str(ver.content.get("media_type", ""))
        p = await asyncio.to_thread(
            preview, oid, ver.version, obj.name, media_type, data, bound.max_side
        )
        if used + p.size > bound.data_bytes:
            continue
        out[oid], used = p, used + p.size
    return out


async def _current(
    session: AsyncSession, user_id: str, object_id: str
) -> tuple[WorkObject, ObjectVersion] | None:
    obj = await session.get(WorkObject, object_id)
    if obj is None or obj.user_id != user_id or obj.deleted:
        return None
    ver = await session.get(ObjectVersion, (object_id, obj.version))
    return (obj, ver) if ver is not None else None

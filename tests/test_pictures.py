"""Pictures reach the model: previews made from an object's bytes (downscaled, the same
bytes every time; described stand-ins for video, audio and 3D), placed with the message
that attached them or in the tail for a result to look at, within the context's bound."""

from __future__ import annotations

import base64
import io
import struct
import wave
from datetime import UTC, datetime
from pathlib import Path

from PIL import Image

from context.build import build_context
from context.pictures import focus, wanted
from context.segments import ContextPolicy
from context.types import MsgRow, OrderRow, StepData, StepRow, TaskHead
from llm.types import ImageBlock, TextBlock
from lomo.settings import Settings
from sim.render import render
from workspace.preview import Preview, preview


def png(width: int, height: int, colour: tuple[int, int, int] = (200, 80, 40)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, format="PNG")
    return out.getvalue()


def test_a_picture_is_scaled_down_and_always_the_same_bytes() -> None:
    a = preview("obj_1", 2, "poster.png", "image/png", png(2000, 1000), 768)
    b = preview("obj_1", 2, "poster.png", "image/png", png(2000, 1000), 768)
    assert (a.width, a.height, a.media_type) == (768, 384, "image/png")
    assert a.data == b.data  # a later step repeats it byte for byte
    shown = Image.open(io.BytesIO(base64.b64decode(a.data)))
    assert shown.size == (768, 384) and shown.getpixel((10, 10)) == (200, 80, 40)
    small = preview("obj_2", 1, "icon.png", "image/png", png(100, 50), 768)
    assert (small.width, small.height) == (100, 50)  # never scaled up


def test_other_media_get_a_described_stand_in(tmp_path: Path) -> None:
    video = render("video", {"prompt": "a fox", "duration_s": 2}, tmp_path, "v")
    v = preview("obj_v", 1, video.name, "video/mp4", video.read_bytes(), 768)
    assert v.note.startswith("Video") and "2.0 s" in v.note and v.media_type == "image/png"
    assert v.width > 0 and v.data  # its first frame
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(8000)
        w.writeframes(b"".join(struct.pack("<h", 0 if i < 8000 else 20000) for i in range(16000)))
    a = preview("obj_a", 1, "jingle.wav", "audio/wav", out.getvalue(), 768)
    assert "2.0 s" in a.note and "00000" in a.note and "88888" in a.note and not a.data
    cube = render("3d", {"prompt": "a cube"}, tmp_path, "c")
    m = preview("obj_m", 1, "cube", "model/gltf-binary", cube.read_bytes(), 768)
    assert "24 vertices, 12 triangles" in m.note and "2.00 x 2.00 x 2.00" in m.note
    assert not m.data
    obj = b"v 0 0 0\nv 1 0 0\nv 0 2 0\nf 1 2 3\n"
    o = preview("obj_o", 1, "tri.obj", "model/obj", obj, 768)
    assert "3 vertices, 1 faces" in o.note and "1.00 x 2.00 x 0.00" in o.note


def _data(**kw: object) -> StepData:
    task = TaskHead("tsk_1", "usr_1", "persistent", "en", "posters", "", 1, "running")
    base: dict[str, object] = {
        "task": task,
        "said": [],
        "steps": [],
        "summaries": {},
        "prev_prefix": None,
        "messages": {},
        "calls": [],
    }
    base.update(kw)
    return StepData(**base)  # type: ignore[arg-type]


def _pic(oid: str) -> Preview:
    return preview(oid, 1, f"{oid}.png", "image/png", png(64, 32), 768)


def test_an_attachment_is_shown_with_its_message() -> None:
    at = datetime(2026, 12, 5, 10, tzinfo=UTC)
    msg = MsgRow("msg_1", "a poster in the style of this", None, None, at, ("obj_ref",))
    data = _data(
        messages={"msg_1": msg}, message_ids=["msg_1"], previews={"obj_ref": _pic("obj_ref")}
    )
    assert wanted(data) == ["obj_ref"]
    built = build_context(data, {}, ContextPolicy.of(Settings()))
    last = built.request.messages[-1].content
    texts = [b.text for b in last if isinstance(b, TextBlock)]
    images = [b for b in last if isinstance(b, ImageBlock)]
    assert texts[0] == "a poster in the style of this" and len(images) == 1
    i = next(k for k, b in enumerate(last) if isinstance(b, ImageBlock))
    named = last[i - 1]
    assert isinstance(named, TextBlock) and named.text.startswith("[runtime] attached:")
    assert "obj_ref" in named.text
    layers = {layer["name"]: layer for layer in built.layers}
    want = {
        "object_id": "obj_ref",
        "version": 1,
        "media_type": "image/png",
        "width": 64,
        "height": 32,
    }
    assert layers["recent_messages"]["images"] == [want]
    assert layers["dynamic_tail"]["images"] == []


def test_the_last_result_is_looked_at_when_the_person_writes_about_it() -> None:
    at = datetime(2026, 12, 5, 10, tzinfo=UTC)
    msg = MsgRow("msg_2", "make it a bit warmer", None, None, at)
    orders = [
        OrderRow("ord_1", "k1", "succeeded", "obj_old", None),
        OrderRow("ord_2", "k2", "succeeded", "obj_last", None),
    ]
    data = _data(messages={"msg_2": msg}, message_ids=["msg_2"], orders=orders)
    # Both results unreported: both are news; once reported, only the last on request.
    assert focus(data) == ["obj_old", "obj_last"]
    seen = StepRow(1, 1, 1, at, ["ord_1", "ord_2"], None)
    data.steps = [seen]
    assert focus(data) == ["obj_last"]
    data.message_ids = []
    assert focus(data) == []  # nobody asked: no picture

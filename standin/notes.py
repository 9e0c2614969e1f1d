"""The offline stand-in's notes task: "generate an image of … and add it to my notes obj_…".
English and German.

It reads the notes, orders the picture, and once the picture is there writes the notes
back with a line for it, on the version it read before the picture was ordered: a model
that does not re-read while it waited. If the person changed the notes meanwhile, the
platform refuses that write as stale (workspace OCC); the stand-in then re-reads and
writes its line on the person's version. The scenario harness's stale-write story drives
exactly this, so the refusal is exercised, not only computed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from llm.types import (
    Message,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from standin.film import text_reply, tool_call

_NOTES = re.compile(r"\b(notes|notizen)\b", re.IGNORECASE)
_IMAGE = re.compile(r"\b(image|picture|bild)\b", re.IGNORECASE)
_OBJECT = re.compile(r"\bobj_[0-9a-z]+\b")
# The runtime reports a finished picture once ("generation succeeded"), then lists it
# among the recent assets; the stand-in's own earlier write names it too.
_ASSET = re.compile(r"(?:→ asset|recent asset|Picture:) (obj_[0-9a-z]+)")
_SAY = {
    "generating": (
        "I'm generating the picture and will add it to your notes.",
        "Ich generiere das Bild und füge es zu deinen Notizen hinzu.",
    ),
    "done": (
        "I added the picture to your notes.",
        "Ich habe das Bild zu deinen Notizen hinzugefügt.",
    ),
    "failed": ("I could not update your notes: ", "Ich konnte deine Notizen nicht ändern: "),
}


def notes_of(text: str) -> str | None:
    """The notes document a request names, if it asks for a picture in them."""
    m = _OBJECT.search(text)
    return m.group(0) if m and _NOTES.search(text) and _IMAGE.search(text) else None


def _results(m: Message, ids: set[str] | None = None) -> list[dict[str, Any]]:
    out = []
    for b in m.content:
        if isinstance(b, ToolResultBlock) and (ids is None or b.tool_use_id in ids):
            try:
                value = json.loads(b.content)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
    return out


def _last_results(request: ModelRequest) -> list[dict[str, Any]]:
    """The results of the model's last step (the runtime's implicit `load_tools` pairs
    after it are skipped); none when that step only said something (a turn ended)."""
    msgs = request.messages
    for i in range(len(msgs) - 1, -1, -1):
        uses = [b for b in msgs[i].content if isinstance(b, ToolUseBlock)]
        if msgs[i].role != "assistant" or (uses and all(u.name == "load_tools" for u in uses)):
            continue
        ids = {u.id for u in uses}
        return [r for m in msgs[i + 1 :] for r in _results(m, ids)] if ids else []
    return []


def _history(request: ModelRequest, doc: str) -> tuple[list[str], list[dict[str, Any]], bool]:
    """The assets generated so far, the reads of the notes (oldest first) and whether a
    write of them went through, over the whole history."""
    assets: list[str] = []
    reads: list[dict[str, Any]] = []
    written = False
    for m in request.messages:
        for b in m.content:
            if isinstance(b, TextBlock) and b.text.startswith("[runtime]"):
                assets += _ASSET.findall(b.text)
            elif isinstance(b, ToolUseBlock) and b.name == "write_object":
                assets += _ASSET.findall(str(b.input.get("text", "")))
        for r in _results(m):
            if r.get("object_id") == doc and "text" in r:
                reads.append(r)
            elif r.get("object_id") == doc and "base_version" in r:
                written = True
    return assets, reads, written


def notes_step(request: ModelRequest, lang: str, text: str) -> ModelResponse:
    de = lang == "de"
    doc = notes_of(text)
    assert doc is not None
    assets, reads, written = _history(request, doc)
    if written:
        return text_reply(_SAY["done"][de], request)
    for r in _last_results(request):
        if "error" in r:
            if reads and assets and len(reads) < 3:
                return tool_call(request, "read_object", {"object_id": doc})  # stale: re-read
            return text_reply(_SAY["failed"][de] + str(r["error"]), request)
        if r.get("status") == "submitted":
            return text_reply(_SAY["generating"][de], request)
        if r.get("object_id") == doc and "text" in r:
            if assets:  # re-read after a refused write: write on this version
                return _write(request, doc, r, assets[-1])
            prompt = " ".join(_OBJECT.sub("", text).split())
            return tool_call(request, "generate_image", {"prompt": prompt, "model": "sim-image-1"})
    if assets and reads:
        # The picture is there: write on the version read before ordering it.
        return _write(request, doc, reads[0], assets[-1])
    return tool_call(request, "read_object", {"object_id": doc})


def _write(request: ModelRequest, doc: str, read: dict[str, Any], asset: str) -> ModelResponse:
    text = str(read["text"]).rstrip("\n") + f"\nPicture: {asset}\n"
    return tool_call(
        request,
        "write_object",
        {"object_id": doc, "base_version": int(read["version"]), "text": text},
    )

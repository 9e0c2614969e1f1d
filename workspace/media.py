"""Which media types an asset may have, and which of them a browser may show inline.

The list is closed: an uploaded asset is served back from the api's own origin, so a type
a browser would run (SVG, HTML, XML, JavaScript) could act as the person who opens it.
Everything here is a format a browser only decodes."""

from __future__ import annotations

# Shown inline (an <img>, <video> or <audio> in the page); decoded, never run.
INLINE = frozenset(
    {
        "image/png",
        "image/jpeg",
        "image/webp",
        "image/gif",
        "video/mp4",
        "video/webm",
        "audio/wav",
        "audio/mpeg",
        "audio/ogg",
    }
)
# Accepted, but always served as a download.
DOWNLOAD_ONLY = frozenset({"model/obj", "model/gltf-binary", "application/pdf", "text/plain"})
ALLOWED = INLINE | DOWNLOAD_ONLY


def base_type(media_type: str) -> str:
    """`Text/Plain; charset=utf-8` -> `text/plain`: parameters never change what it is."""
    return media_type.split(";", 1)[0].strip().lower()


def allowed(media_type: str) -> bool:
    return base_type(media_type) in ALLOWED

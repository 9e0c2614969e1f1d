"""The offline stand-in model: deterministic rules that drive the real runtime without a key.

It reads only what a real model would read (the request), answers in the language of the
person's own words, and uses the same tools as Claude would. Each purpose has its rules in
a module beside this one (routing, extraction, summaries, the poster task, notes, the film);
what it covers is listed in the README.
"""

from __future__ import annotations

import json
import re

from llm.types import (
    Message,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from routing.text import detect_language
from standin.film import film_step, is_film_task
from standin.notes import notes_of, notes_step
from standin.tasks import forget_step, is_poster_task, person_texts, poster_step

_IMAGE = re.compile(r"\b(image|picture|photo|bild|foto|generiere|generate)\b", re.IGNORECASE)
_VIDEO = re.compile(r"\b(video|clip|animate|animiere)\b", re.IGNORECASE)
_THREE_D = re.compile(r"\b(3d|3-d|three-dimensional|dreidimensional\w*)\b", re.IGNORECASE)
# A poke, not a request: it must never start a second generation.
_NUDGE = re.compile(r"^\s*(continue|go on|weiter|mach weiter)\W*$", re.IGNORECASE)
_QUESTION = re.compile(
    r"^\s*(which|what|how|does|can|welche|was|wie|kann|unterstützt)\b|\?\s*$", re.I
)
_NUMBERS = {
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "ten": 10,
    "zwei": 2,
    "drei": 3,
    "vier": 4,
    "fünf": 5,
    "sechs": 6,
    "zehn": 10,
}
_DURATION = re.compile(r"\b(\d+|" + "|".join(_NUMBERS) + r")[\s-]*(?:second|sekunde)", re.I)


def _last_user_texts(messages: list[Message]) -> list[str]:
    if not messages or messages[-1].role != "user":
        return []
    return [b.text for b in messages[-1].content if isinstance(b, TextBlock)]


def _person_text(texts: list[str]) -> str:
    return " ".join(t for t in texts if not t.startswith("[runtime]"))


class OfflineModel:
    name = "offline"

    def _tool_id(self, request: ModelRequest) -> str:
        # Deterministic per request shape, so a repeated request gets the same answer.
        return f"toolu_{request.purpose}_{len(request.messages):04d}"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.purpose == "route":
            return self._route(request)
        if request.purpose == "summarize":
            from standin.summarize import summarize

            return summarize(request)
        if request.purpose == "summarize_episode":
            from standin.summarize import episode

            return episode(request)
        if request.purpose == "extract":
            # Memory extraction rules live with the memory service.
            from standin.extract import offline_extract

            return offline_extract(request)
        person = person_texts(request.messages)
        if forget := forget_step(request, person):
            return forget
        if is_film_task(" ".join(person)):
            text = " ".join(person)
            return film_step(request, detect_language(text), text)
        if notes_of(" ".join(person)):
            text = " ".join(person)
            return notes_step(request, detect_language(text), text)
        if is_poster_task(request, " ".join(person)):
            lang = detect_language(" ".join(person))
            latest = person[-1] if person else ""
            return poster_step(request, lang, " ".join(person), latest)
        return self._task_step(request)

    def _route(self, request: ModelRequest) -> ModelResponse:
        # The routing rules: standin/router.py.
        from standin.router import route

        return route(request)

    def _task_step(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1] if request.messages else None
        texts = _last_user_texts(request.messages)
        person = _person_text(texts)
        lang = detect_language(_all_person_text(request.messages))
        results = [b for b in (last.content if last else []) if isinstance(b, ToolResultBlock)]
        runtime_notes = " ".join(t for t in texts if t.startswith("[runtime]"))
        everything = _all_person_text(request.messages)
        if "generation succeeded" in runtime_notes:
            what = _kind_of(everything)
            reply = _READY[what][1 if lang == "de" else 0]
            reply += _objects_in(runtime_notes.split("recent asset")[0])
            return _text(reply, request)
        if "generation failed" in runtime_notes:
            return _text(
                "Die Generierung ist fehlgeschlagen." if lang == "de" else "The generation failed.",
                request,
            )
        if results and all('"error"' in r.content for r in results):
            return _text(
                "Das geht so nicht: " if lang == "de" else "That did not work: ",
                request,
                suffix=results[0].content,
            )
        if results:
            submitted = any('"status": "submitted"' in r.content for r in results)
            if submitted:
                return _text(
                    "Ich generiere das Bild, einen Moment."
                    if lang == "de"
                    else "I'm generating the image; it will appear here when ready.",
                    request,
                )
            return _text("Erledigt." if lang == "de" else "Done.", request)
        if person and _VIDEO.search(person):
            ref = _latest_asset(runtime_notes)
            args: dict[str, object] = {"prompt": person, "model": "sim-video-1"}
            if ref:
                args["reference_object_id"] = ref
            if m := _DURATION.search(person):
                word = m.group(1).lower()
                args["duration_s"] = int(word) if word.isdigit() else _NUMBERS[word]
            return ModelResponse(
                content=[
                    ToolUseBlock(id=self._tool_id(request), name="generate_video", input=args)
                ],
                stop_reason="tool_use",
                usage=Usage(input_tokens=_tokens(request), output_tokens=30),
                model="lomo-offline",
            )
        if person and (_THREE_D.search(person) or _revises(person, everything, _THREE_D)):
            # A follow-up ("make the cup a bit taller") is a new model from the whole brief.
            prompt = person if _THREE_D.search(person) else _brief(request.messages)
            return ModelResponse(
                content=[
                    ToolUseBlock(
                        id=self._tool_id(request),
                        name="generate_3d",
                        input={"prompt": prompt, "model": "sim-3d-1"},
                    )
                ],
                stop_reason="tool_use",
                usage=Usage(input_tokens=_tokens(request), output_tokens=30),
                model="lomo-offline",
            )
        if person and _revises(person, everything, _IMAGE):
            args = {"prompt": _brief(request.messages), "model": "sim-image-1"}
            if ref := _latest_asset(runtime_notes):
                args["reference_object_id"] = ref
            return ModelResponse(
                content=[
                    ToolUseBlock(id=self._tool_id(request), name="generate_image", input=args)
                ],
                stop_reason="tool_use",
                usage=Usage(input_tokens=_tokens(request), output_tokens=30),
                model="lomo-offline",
            )
        if person and _IMAGE.search(person):
            return ModelResponse(
                content=[
                    ToolUseBlock(
                        id=self._tool_id(request),
                        name="generate_image",
                        input={"prompt": person, "model": "sim-image-1"},
                    )
                ],
                stop_reason="tool_use",
                usage=Usage(input_tokens=_tokens(request), output_tokens=30),
                model="lomo-offline",
            )
        return _text("Verstanden." if lang == "de" else "Understood.", request)


def _all_person_text(messages: list[Message]) -> str:
    out: list[str] = []
    for m in messages:
        if m.role == "user":
            out.extend(
                b.text
                for b in m.content
                if isinstance(b, TextBlock) and not b.text.startswith("[runtime]")
            )
    return " ".join(out)


_READY = {
    "3d": ("Here is your 3D model.", "Hier ist dein 3D-Modell."),
    "video": ("Here is your video.", "Hier ist dein Video."),
    "image": ("Here is your image.", "Hier ist dein Bild."),
}


def _kind_of(everything: str) -> str:
    if _THREE_D.search(everything):
        return "3d"
    return "video" if _VIDEO.search(everything) else "image"


def _revises(person: str, everything: str, kind: re.Pattern[str]) -> bool:
    """A later message in a task that already made this kind of thing, asking for a
    change: neither a new request of its own nor a mere poke."""
    return (
        not _NUDGE.match(person)
        and not any(k.search(person) for k in (_IMAGE, _VIDEO, _THREE_D))
        and not _QUESTION.search(person)
        and everything.strip() != person.strip()
        and kind.search(everything) is not None
    )


def _brief(messages: list[Message]) -> str:
    """The opening request and every change since, in the person's words."""
    return "; ".join(
        b.text
        for m in messages
        if m.role == "user"
        for b in m.content
        if isinstance(b, TextBlock)
        and not b.text.startswith("[runtime]")
        and not _NUDGE.match(b.text)
    )


def _objects_in(note: str) -> str:
    ids = re.findall(r"obj_[0-9a-z]+", note)
    return f" ({', '.join(ids)})" if ids else ""


def _tokens(request: ModelRequest) -> int:
    size = sum(len(s.text) for s in request.system) + len(
        json.dumps([str(m) for m in request.messages])
    )
    return size // 4


def _latest_asset(notes: str) -> str | None:
    m = re.search(r"recent asset (obj_[0-9a-z]+): image", notes)
    return m.group(1) if m else None


def _text(text: str, request: ModelRequest, suffix: str = "") -> ModelResponse:
    text += suffix
    return ModelResponse(
        content=[TextBlock(text=text)],
        stop_reason="end_turn",
        usage=Usage(input_tokens=_tokens(request), output_tokens=len(text) // 4 + 1),
        model="lomo-offline",
    )

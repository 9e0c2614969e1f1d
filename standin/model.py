"""The offline stand-in model: deterministic rules that drive the real runtime without a key.

It reads only what a real model would read (the request), answers in the language of the
person's own words, and uses the same tools as Claude would. Each purpose has its rules in
a module beside this one (routing, extraction, summaries, the poster task, notes, the film);
what it covers is listed in docs/architecture.md#processes.
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
        texts = _last_user_texts(request.messages)
        person = _person_text(texts)
        everything = _all_person_text(request.messages)
        lang = detect_language(everything)
        runtime_notes = " ".join(t for t in texts if t.startswith("[runtime]"))
        # The person's new request first: a result the runtime presented is reported to the
        # model with the next message, beside the earlier call's result.
        if person and (call := _generation_call(request, person, everything, runtime_notes)):
            name, args = call
            if _lightweight(request):
                # A single picture (clip, model) asked for: its result is the answer, and
                # the runtime shows it without asking again.
                args["present_when_done"] = True
            return ModelResponse(
                content=[ToolUseBlock(id=self._tool_id(request), name=name, input=args)],
                stop_reason="tool_use",
                usage=Usage(input_tokens=_tokens(request), output_tokens=30),
                model="lomo-offline",
            )
        if (finished := _after_generation(request, lang, runtime_notes, everything)) is not None:
            return finished
        if results := _tool_results(request.messages):
            return _after_tools(request, lang, results)
        return _text("Verstanden." if lang == "de" else "Understood.", request)


_LIGHTWEIGHT = re.compile(r"^\[runtime\] task \S+ \(lightweight\)", re.MULTILINE)


def _lightweight(request: ModelRequest) -> bool:
    """The task's fixed lines (in the system prompt) say it is a lightweight task."""
    return any(_LIGHTWEIGHT.search(b.text) for b in request.system)


def _tool_results(messages: list[Message]) -> list[ToolResultBlock]:
    last = messages[-1] if messages else None
    return [b for b in (last.content if last else []) if isinstance(b, ToolResultBlock)]


def _after_generation(
    request: ModelRequest, lang: str, runtime_notes: str, everything: str
) -> ModelResponse | None:
    """The runtime's note that a generation ended: show the result, or say it failed."""
    if "generation succeeded" in runtime_notes:
        reply = _READY[_kind_of(everything)][1 if lang == "de" else 0]
        reply += _objects_in(runtime_notes.split("recent asset")[0])
        return _text(reply, request)
    if "generation failed" in runtime_notes:
        return _text(
            "Die Generierung ist fehlgeschlagen." if lang == "de" else "The generation failed.",
            request,
        )
    return None


def _after_tools(request: ModelRequest, lang: str, results: list[ToolResultBlock]) -> ModelResponse:
    """The answer to the tools' results: the first error if all failed, else a short word."""
    if all('"error"' in r.content for r in results):
        return _text(
            "Das geht so nicht: " if lang == "de" else "That did not work: ",
            request,
            suffix=results[0].content,
        )
    if any('"status": "submitted"' in r.content for r in results):
        return _text(
            "Ich generiere das Bild, einen Moment."
            if lang == "de"
            else "I'm generating the image; it will appear here when ready.",
            request,
        )
    return _text("Erledigt." if lang == "de" else "Done.", request)


def _generation_call(
    request: ModelRequest, person: str, everything: str, runtime_notes: str
) -> tuple[str, dict[str, Any]] | None:
    """The generation tool the person's latest words ask for, with its input, if any."""
    if _VIDEO.search(person):
        args: dict[str, Any] = {"prompt": person, "model": "sim-video-1"}
        if ref := _latest_asset(runtime_notes):
            args["reference_object_id"] = ref
        if m := _DURATION.search(person):
            word = m.group(1).lower()
            args["duration_s"] = int(word) if word.isdigit() else _NUMBERS[word]
        return "generate_video", args
    if _THREE_D.search(person) or _revises(person, everything, _THREE_D):
        # A follow-up ("make the cup a bit taller") is a new model from the whole brief.
        prompt = person if _THREE_D.search(person) else _brief(request.messages)
        return "generate_3d", {"prompt": prompt, "model": "sim-3d-1"}
    if _revises(person, everything, _IMAGE):
        args = {"prompt": _brief(request.messages), "model": "sim-image-1"}
        if ref := _latest_asset(runtime_notes):
            args["reference_object_id"] = ref
        return "generate_image", args
    if _IMAGE.search(person):
        return "generate_image", {"prompt": person, "model": "sim-image-1"}
    return None


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

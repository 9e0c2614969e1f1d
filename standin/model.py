"""The offline stand-in model: drives the real runtime without a key, deterministically.

It reads only what a real model would read (the request), answers in the language of the
person's own words, and uses the same tools as Claude would. What a person wants comes from
the intent recogniser (standin/intents.py, by meaning); each purpose has its module beside
this one (routing, extraction, summaries, the poster task, notes, the film); what it covers
is listed in docs/architecture.md#processes.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
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
from standin.intents import MEDIA, recognise, recogniser
from standin.notes import notes_of, notes_step
from standin.parts import read
from standin.planner import plan_step
from standin.replies import kind_word, ready, say
from standin.requested import requested, work_name
from standin.review import Review, review
from standin.router import asked_for, multipart_work
from standin.tasks import forget_step, person_texts

_OBJECT_ID = re.compile(r"\b(?:obj|tsk|ord|crd|chk)_[0-9a-z]+\b")

# With earlier work in the task, a message that reads even partly as a change is one.
CHANGE_WITH_CONTEXT = 0.25
_SUCCEEDED = re.compile(r"generation succeeded: order \S+ → asset (obj_[0-9a-z]+)")
_LIGHTWEIGHT = re.compile(r"^\[runtime\] task \S+ \(lightweight\)", re.MULTILINE)


def _last_user_texts(messages: list[Message]) -> list[str]:
    if not messages or messages[-1].role != "user":
        return []
    return [b.text for b in messages[-1].content if isinstance(b, TextBlock)]


def _person_text(texts: list[str]) -> str:
    return " ".join(t for t in texts if not t.startswith("[runtime]"))


async def _recogniser_loaded() -> None:
    """The recogniser loads on first use (the embedder and the fits take tens of seconds on
    a busy machine): off the event loop, where other requests' database turns wait."""
    await asyncio.to_thread(recogniser)


class OfflineModel:
    name = "offline"

    def _tool_id(self, request: ModelRequest) -> str:
        # Deterministic per request shape, so a repeated request gets the same answer.
        return f"toolu_{request.purpose}_{len(request.messages):04d}"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.purpose == "route":
            await _recogniser_loaded()
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
        await _recogniser_loaded()
        person = person_texts(request.messages)
        if forget := forget_step(request, person):
            return forget
        if is_film_task(" ".join(person)):
            text = " ".join(person)
            return film_step(request, detect_language(text), text)
        if notes_of(" ".join(person)):
            text = " ".join(person)
            return notes_step(request, detect_language(text), text)
        if _series(request, person):
            return plan_step(request, detect_language(" ".join(person)), person)
        return self._task_step(request)

    def _route(self, request: ModelRequest) -> ModelResponse:
        # The routing rules: standin/router.py.
        from standin.router import route

        return route(request)

    def _task_step(self, request: ModelRequest) -> ModelResponse:
        texts = _last_user_texts(request.messages)
        person = _person_text(texts)
        said = person_texts(request.messages)
        everything = " ".join(said)
        lang = detect_language(everything)
        runtime_notes = " ".join(t for t in texts if t.startswith("[runtime]"))
        work = _Work.of(request, said)
        # The person's new request first: a result the runtime presented is reported to the
        # model with the next message, beside the earlier call's result.
        if person and (call := _generation_call(request, person, work, runtime_notes)):
            name, args = call
            blocks: list[TextBlock | ToolUseBlock] = []
            if _lightweight(request):
                # A single picture (clip, model) asked for: its result is the answer, and
                # the runtime shows it without asking again; what is being made is said now.
                args["present_when_done"] = True
                kind = kind_word(name.removeprefix("generate_"), lang)
                blocks.append(TextBlock(say("making", lang, kind=kind, name=work.name)))
            blocks.append(ToolUseBlock(id=self._tool_id(request), name=name, input=args))
            return ModelResponse(
                content=blocks,
                stop_reason="tool_use",
                usage=Usage(input_tokens=_tokens(request), output_tokens=30),
                model="lomo-offline",
            )
        if (finished := _after_generation(request, lang, runtime_notes, work)) is not None:
            return finished
        if results := _tool_results(request.messages):
            return _after_tools(request, lang, results, work)
        return _text(_no_call(person, lang, work, runtime_notes), request)


@dataclass
class _Work:
    """What this task is making: its kind (from its generation calls, else the medium the
    opening request is closest to), its name in the person's words, whether it has made a
    piece already."""

    kind: str
    name: str
    made: bool
    opening: str

    @staticmethod
    def of(request: ModelRequest, said: list[str]) -> _Work:
        calls = [
            b.name.removeprefix("generate_")
            for m in request.messages
            for b in m.content
            if isinstance(b, ToolUseBlock) and b.name.startswith("generate_")
        ]
        opening = said[0] if said else ""
        kind = calls[-1] if calls else (recognise(opening).medium() if opening else "image")
        return _Work(kind, work_name(opening), bool(calls), opening)


def _lightweight(request: ModelRequest) -> bool:
    """The task's fixed lines (in the system prompt) say it is a lightweight task."""
    return any(_LIGHTWEIGHT.search(b.text) for b in request.system)


def _series(request: ModelRequest, person: list[str]) -> bool:
    """A persistent task opened by a request for multi-part work (a single poster, even
    one revised often enough to be promoted, is no series)."""
    if any(_LIGHTWEIGHT.search(s.text) for s in request.system) or not person:
        return False
    return multipart_work(person[0], recognise(person[0]))


def _tool_results(messages: list[Message]) -> list[dict[str, Any]]:
    """The results of the model's last calls when the latest message brings them; the
    runtime's own `load_tools` pairs (empty results that only load tools) are skipped."""
    last = messages[-1] if messages else None
    if last is None or not any(isinstance(b, ToolResultBlock) for b in last.content):
        return []
    for i in range(len(messages) - 1, -1, -1):
        uses = [
            b for b in messages[i].content if isinstance(b, ToolUseBlock) and b.name != "load_tools"
        ]
        if messages[i].role == "assistant" and uses:
            ids = {u.id for u in uses}
            return [
                _json(b.content)
                for m in messages[i + 1 :]
                for b in m.content
                if isinstance(b, ToolResultBlock) and b.tool_use_id in ids and b.content
            ]
    return []


def _after_generation(
    request: ModelRequest, lang: str, runtime_notes: str, work: _Work
) -> ModelResponse | None:
    """The runtime's note that a generation ended: show the result by name, or say why not."""
    if _SUCCEEDED.search(runtime_notes):
        looked = review(request.messages)
        if looked is None or looked.verdict.ok:
            return _text(ready(work.kind, lang, work.name), request)
        return _after_review(request, lang, work, looked)
    if (i := runtime_notes.find("generation failed")) >= 0:
        why = runtime_notes[i:].split(":", 2)[-1].split("\n")[0].strip()
        reason = _OBJECT_ID.sub("", why).strip(" .") or "—"
        failed = say("failed", lang, kind=kind_word(work.kind, lang), name=work.name)
        return _text(failed + reason + ".", request)
    return None


def _after_review(request: ModelRequest, lang: str, work: _Work, looked: Review) -> ModelResponse:
    """A result that misses its brief is made once more; a second miss is presented with
    a note saying what is off."""
    off = "; ".join(looked.verdict.off)
    kind = kind_word(work.kind, lang)
    if looked.remakes_left <= 0:
        return _text(ready(work.kind, lang, work.name) + say("still_off", lang, off=off), request)
    again = ToolUseBlock(
        id=f"toolu_remake_{len(request.messages)}", name=looked.call.name, input=looked.call.input
    )
    text = TextBlock(say("remaking", lang, kind=kind, name=work.name, off=off))
    return ModelResponse(
        content=[text, again],
        stop_reason="tool_use",
        usage=Usage(input_tokens=_tokens(request), output_tokens=40),
        model="lomo-offline",
    )


def _after_tools(
    request: ModelRequest, lang: str, values: list[dict[str, Any]], work: _Work
) -> ModelResponse:
    """The answer to the generation calls' results, saying what exists and what does not."""
    kind = kind_word(work.kind, lang)
    if all("error" in v for v in values):
        reason = _OBJECT_ID.sub("", str(values[0]["error"])).strip()
        return _text(say("failed", lang, kind=kind, name=work.name) + reason, request)
    if priced := [v for v in values if v.get("status") == "needs_confirmation"]:
        cents = int(priced[0].get("price_cents") or priced[0].get("amount_cents") or 0)
        price = f"{cents / 100:.2f} EUR"
        return _text(say("price", lang, kind=kind, name=work.name, price=price), request)
    if short := [v for v in values if v.get("status") == "needs_credit"]:
        price = f"{int(short[0].get('price_cents') or 0) / 100:.2f} EUR"
        return _text(say("credit", lang, kind=kind, name=work.name, price=price), request)
    submitted = sum(v.get("status") == "submitted" for v in values)
    if submitted > 1:
        return _text(say("making_many", lang, n=submitted, name=work.name), request)
    key = "making" if submitted else "still_making"
    return _text(say(key, lang, kind=kind, name=work.name), request)


def _no_call(person: str, lang: str, work: _Work, runtime_notes: str) -> str:
    """What to say when the person's words start nothing: where the work stands, or what
    the offline model can do."""
    rec = recognise(person) if person.strip() else None
    if rec is not None and rec.intent == "multipart" and not work.made:
        return say("plan_elsewhere", lang, name=work.name)
    if rec is not None and rec.intent == "change" and not work.made:
        return say("nothing_to_change", lang)
    kind = kind_word(work.kind, lang)
    if "waiting on order" in runtime_notes:
        return say("still_making", lang, kind=kind, name=work.name)
    if work.made and (rec is None or rec.intent in ("other", None)):
        return say("made", lang, kind=kind, name=work.name)
    return say("unsure", lang)


def _generation_call(
    request: ModelRequest, person: str, work: _Work, runtime_notes: str
) -> tuple[str, dict[str, Any]] | None:
    """The generation the person's latest words ask for, with its input, if any: a new
    piece of the medium they name, or (with earlier work here) a change of it, made anew
    from the whole brief. A request repeated after its piece exists makes a new piece."""
    rec = recognise(person)
    opening = person.strip() == work.opening.strip()
    changes = not opening and (
        rec.intent == "change" or rec.scores["change"] >= CHANGE_WITH_CONTEXT
    )
    if changes and rec.intent not in ("other", "question", "remember", "forget"):
        kind, prompt = work.kind, _brief(request.messages)
    elif rec.intent in MEDIA:
        kind, prompt = rec.intent, person
    elif opening and asked_for(person):
        # A piece asked for in words the recogniser reads as a statement ("Eine
        # 15-sekündige Ansage für …"): the medium its noun names.
        kind, prompt = read(person).parts[0].medium, person
    else:
        return None
    wanted = requested(person)
    args: dict[str, Any] = {"prompt": prompt, "model": f"sim-{kind}-1"}
    # A change starts from the picture it changes, and a clip from the latest picture; a
    # new picture starts from its words alone.
    own = _own_piece(request) if changes and kind == "image" else None
    if (changes or kind == "video") and (ref := own or _latest_asset(runtime_notes)):
        args["reference_object_id"] = ref
    seconds = next((p.duration_s for p in read(person).parts if p.duration_s), None)
    if kind in ("video", "audio") and (seconds or wanted.duration_s):
        args["duration_s"] = seconds or wanted.duration_s
    return f"generate_{kind}", args


def _brief(messages: list[Message]) -> str:
    """The opening request and every change since, in the person's words (pokes such as
    "continue" left out: they change nothing)."""
    return "; ".join(
        t for t in person_texts(messages) if recognise(t).intent not in ("other", "question")
    )


def _json(content: str) -> dict[str, Any]:
    try:
        value = json.loads(content)
    except ValueError:
        return {"error": content}
    return value if isinstance(value, dict) else {"result": value}


def _tokens(request: ModelRequest) -> int:
    size = sum(len(s.text) for s in request.system) + len(
        json.dumps([str(m) for m in request.messages])
    )
    return size // 4


def _own_piece(request: ModelRequest) -> str | None:
    """This task's own latest piece, from the runtime's lines in its history: the user's
    few most recent assets may by now all be other tasks' work (only pictures are
    references here, so only a picture task asks for it)."""
    found = [
        m.group(1)
        for msg in request.messages
        for b in msg.content
        if isinstance(b, TextBlock)
        for m in _SUCCEEDED.finditer(b.text)
    ]
    return found[-1] if found else None


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

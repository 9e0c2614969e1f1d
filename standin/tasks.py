"""What the offline stand-in reads in a persistent task's request and how it acts on it:
the checklist and card lines of the runtime's dynamic tail, the finished and failed jobs,
the last tool results; tool calls and replies; the forget card. The planner for multi-part
work (standin/planner.py) is built on these.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from llm.types import (
    Message,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from lomo.words import say
from routing.text import detect_language
from standin.intents import recognise

_ITEM = re.compile(
    r"^  - \[(\w+)\] (chk_[0-9a-z]+): (.*?)( \(needs the person's confirmation\))?"
    r"( artifacts (.*))?$",
    re.MULTILINE,
)
_ANSWER = re.compile(r"the person answered card (crd_[0-9a-z]+) \((.*?)\): (\w+)(?: option (\S+))?")
_SUCCEEDED = re.compile(r"generation succeeded: order \S+ → asset (obj_[0-9a-z]+)")
_FAILED = re.compile(r"generation failed: order (ord_[0-9a-z]+):")


@dataclass
class Item:
    status: str
    id: str
    title: str
    artifacts: list[str] = field(default_factory=list)


@dataclass
class View:
    """What the stand-in reads from one request."""

    lang: str
    person: str  # everything the person said in this task
    latest: str  # what the person said most recently
    items: list[Item]
    answers: list[tuple[str, str, str, str]]  # card_id, title, action, option
    succeeded: list[str]  # finished assets not yet on a checklist step
    waiting: int  # jobs still running
    results: list[str]  # the last step's tool results
    failed: list[str] = field(default_factory=list)  # orders newly shown as failed


# --- reading ------------------------------------------------------------------------
def read_view(request: ModelRequest, lang: str, person: str, latest: str) -> View:
    """What the stand-in reads from one request of a persistent task."""
    tail = ""
    results: list[str] = []
    last = request.messages[-1] if request.messages else None
    if last is not None:
        for b in last.content:
            if isinstance(b, TextBlock) and b.text.startswith("[runtime]"):
                tail += b.text + "\n"  # the tail's lines, and those naming its pictures
            elif isinstance(b, ToolResultBlock):
                results.append(b.content)
    items = [
        Item(
            m.group(1), m.group(2), m.group(3), (m.group(6) or "").split(", ") if m.group(6) else []
        )
        for m in _ITEM.finditer(tail)
    ]
    answers = [
        (m.group(1), m.group(2), m.group(3), m.group(4) or "") for m in _ANSWER.finditer(tail)
    ]
    succeeded = _SUCCEEDED.findall(tail)
    waiting = len(re.findall(r"^\[runtime\] waiting on order ", tail, re.MULTILINE))
    failed = _FAILED.findall(tail)
    return View(lang, person, latest, items, answers, succeeded, waiting, results, failed)


def answered(v: View, title_words: tuple[str, ...], action: str) -> str | None:
    for card_id, title, act, _ in v.answers:
        if act == action and any(w in title for w in title_words):
            return card_id
    for r in v.results:
        if '"status": "approved"' in r:
            return "approved"
    return None


# --- acting -------------------------------------------------------------------------
Call = tuple[str, dict[str, object]]


def again(request: ModelRequest, v: View) -> list[Call]:
    """A job that failed (refunded; never resubmitted by the platform) is ordered again,
    as a new call with the failed call's input, read from the history. The failure line
    is shown once, so this is the step that must act on it, busy or not."""
    out: list[Call] = []
    for order_id in v.failed:
        use_id = next(
            (
                b.tool_use_id
                for m in request.messages
                for b in m.content
                if isinstance(b, ToolResultBlock) and order_id in b.content
            ),
            None,
        )
        use = next(
            (
                b
                for m in request.messages
                for b in m.content
                if isinstance(b, ToolUseBlock) and b.id == use_id
            ),
            None,
        )
        if use is not None and use.name.startswith("generate_"):
            out.append((use.name, dict(use.input)))
    return out


def done(item: Item, artifacts: list[str] | None = None, card: str | None = None) -> Call:
    upd: dict[str, object] = {"id": item.id, "status": "done"}
    if artifacts:
        upd["artifacts"] = artifacts
    if card and card != "approved":
        upd["card_id"] = card
    elif card == "approved":
        upd["note"] = "budget approved by the person"
    return ("update_checklist", {"update": [upd]})


def reply(text: str, request: ModelRequest) -> ModelResponse:
    return ModelResponse(
        content=[TextBlock(text=text)],
        stop_reason="end_turn",
        usage=Usage(input_tokens=_tokens(request), output_tokens=len(text) // 4 + 1),
        model="lomo-offline",
    )


def calls(request: ModelRequest, made: list[Call]) -> ModelResponse:
    base = f"toolu_{request.purpose}_{len(request.messages):04d}"
    return ModelResponse(
        content=[
            ToolUseBlock(id=f"{base}_{n}", name=name, input=args)
            for n, (name, args) in enumerate(made)
        ],
        stop_reason="tool_use",
        usage=Usage(input_tokens=_tokens(request), output_tokens=40 * len(made)),
        model="lomo-offline",
    )


def _tokens(request: ModelRequest) -> int:
    return len(json.dumps([str(m) for m in request.messages])) // 4


def person_texts(messages: list[Message]) -> list[str]:
    return [
        b.text
        for m in messages
        if m.role == "user"
        for b in m.content
        if isinstance(b, TextBlock) and not b.text.startswith("[runtime]")
    ]


# Only trims the leading "forget (that)" off what to forget; recognising a forget request
# is the recogniser's job.
_LANGUAGE = re.compile(r"\[runtime\] task \S+ \(\w+\), language (\w+)")
_FORGET = re.compile(
    r"^\s*(?:please\s+)?(?:forget|vergiss)\s*,?\s*(?:that|dass)?\s*(?P<what>.+?)[.!]?\s*$",
    re.IGNORECASE,
)


def _forget_answer(request: ModelRequest) -> re.Match[str] | None:
    """The person's answer to a forget card in the runtime's lines, told by the card's
    title (the words catalogue's): forgetting scrubs the request and the call that asked
    from the history, so the answer is what is left of them."""
    last = request.messages[-1] if request.messages else None
    for b in last.content if last else []:
        if not isinstance(b, TextBlock) or not b.text.startswith("[runtime]"):
            continue
        for m in _ANSWER.finditer(b.text):
            for lang in ("en", "de"):
                head, _, tail = say("memory.forget", lang, what="\x00").partition("\x00")
                if m.group(2).startswith(head) and m.group(2).endswith(tail):
                    return m
    return None


def forget_step(request: ModelRequest, person: list[str]) -> ModelResponse | None:
    """ "Forget that our brand colour is blue": ask on a forget card (the memory service
    acts only on the person's confirmation), then say what happened."""
    asked = _forget_answer(request) is not None or any(
        isinstance(b, ToolUseBlock) and b.name == "forget_memory"
        for msg in request.messages
        for b in msg.content
    )
    # Once forgotten, the request's own words are scrubbed: the call in the history and the
    # task's language in the header still say what the task is.
    if not asked and (not person or recognise(person[0]).intent != "forget"):
        return None
    m = _FORGET.match(person[0]) if person else None
    what = m.group("what") if m else (person[0].strip(" .!") if person else "")
    header = _LANGUAGE.search(" ".join(b.text for b in request.system))
    lang = header.group(1) if header else detect_language(person[0] if person else "")
    tail = next(
        (
            b.text
            for b in (request.messages[-1].content if request.messages else [])
            if isinstance(b, TextBlock) and b.text.startswith("[runtime]")
        ),
        "",
    )
    answer = _forget_answer(request) or _ANSWER.search(tail)
    if answer is None and asked:
        return ModelResponse(
            content=[TextBlock(text="Vergessen." if lang == "de" else "Forgotten.")],
            stop_reason="end_turn",
            usage=Usage(input_tokens=_tokens(request), output_tokens=4),
            model="lomo-offline",
        )
    if answer is None:
        return calls(request, [("forget_memory", {"text": what})])
    if answer.group(3) == "confirm":
        reply = "Vergessen." if lang == "de" else "Forgotten."
    else:
        reply = "Gut, ich behalte es." if lang == "de" else "Alright, I'll keep it."
    return ModelResponse(
        content=[TextBlock(text=reply)],
        stop_reason="end_turn",
        usage=Usage(input_tokens=_tokens(request), output_tokens=4),
        model="lomo-offline",
    )

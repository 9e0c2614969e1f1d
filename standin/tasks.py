"""The offline stand-in's persistent-task behaviour: the poster series.

Deterministic rules over what a real model would read in the request: the person's
words, the checklist and card lines of the runtime's dynamic tail, and the last tool
results. Plan → budget card → four drafts (parallel) → a select card → three finals →
done; later "a bit warmer" adds a step and a warmer variant. English and German.
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
from money.catalogue import CATALOGUE, DEFAULT_MODEL
from routing.text import detect_language
from standin.intents import recognise

POSTER = re.compile(r"\w*(poster|plakat)\w*", re.IGNORECASE)
WARMER = re.compile(r"\b(warm\w*|wärmer\w*)", re.IGNORECASE)
DRAFTS, FINALS = 4, 3
FORMATS = ("A2 portrait", "square 1:1", "story 9:16")
_ITEM = re.compile(
    r"^  - \[(\w+)\] (chk_[0-9a-z]+): (.*?)( \(needs the person's confirmation\))?"
    r"( artifacts (.*))?$",
    re.MULTILINE,
)
_ANSWER = re.compile(r"the person answered card (crd_[0-9a-z]+) \((.*?)\): (\w+)(?: option (\S+))?")
_SUCCEEDED = re.compile(r"generation succeeded: order \S+ → asset (obj_[0-9a-z]+)")
_FAILED = re.compile(r"generation failed: order (ord_[0-9a-z]+):")
_PLAN = {
    "en": (
        "Agree on the budget for the drafts",
        f"Generate {DRAFTS} draft posters",
        "Pick a favourite draft",
        f"Final posters in {FINALS} formats",
    ),
    "de": (
        "Budget für die Entwürfe abstimmen",
        f"{DRAFTS} Plakatentwürfe generieren",
        "Lieblingsentwurf auswählen",
        f"Finale Plakate in {FINALS} Formaten",
    ),
}


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


def is_poster_task(request: ModelRequest, person: str) -> bool:
    return bool(POSTER.search(person))


def poster_step(request: ModelRequest, lang: str, person: str, latest: str) -> ModelResponse:
    v = _read(request, lang, person, latest)
    if not v.items:
        return _calls(request, _plan(v))
    steps = {i: v.items[i] for i in range(min(4, len(v.items)))}
    budget, drafts, pick, finals = steps.get(0), steps.get(1), steps.get(2), steps.get(3)
    extra = v.items[4:]
    busy = v.waiting > 0  # jobs still running: say so and let the runtime park
    if WARMER.search(v.latest) and not any(WARMER.search(i.title) for i in extra):
        return _calls(request, _warmer(v, pick))
    for item in extra:
        if item.status != "done":
            if v.succeeded and not busy:
                return _calls(request, [_done(item, v.succeeded)])
            if again := _again(request, v):
                return _calls(request, again)
            return _text(v, _say(v, "warmer_wait"), request)
    if budget and budget.status != "done":
        card = _answered(v, ("Budget",), "confirm")
        if card is None:
            return _text(v, _say(v, "budget_wait"), request)
        return _calls(request, [_done(budget, card=card), *_drafts(v)])
    if drafts and drafts.status != "done":
        if len(v.succeeded) < DRAFTS:
            if again := _again(request, v):
                return _calls(request, again)
            return _text(v, _say(v, "drafts_wait"), request)
        options = [
            {"id": obj, "label": f"{'Entwurf' if v.lang == 'de' else 'Draft'} {n + 1}"}
            for n, obj in enumerate(v.succeeded[:DRAFTS])
        ]
        ask: Call = (
            "ask_person",
            {
                "kind": "select",
                "title": _say(v, "pick"),
                "options": options,
                "item_id": pick.id if pick else None,
            },
        )
        return _calls(request, [_done(drafts, v.succeeded[:DRAFTS]), ask])
    if pick and pick.status != "done":
        return _text(v, _say(v, "pick"), request)
    if finals and finals.status != "done":
        if len(v.succeeded) >= FINALS:
            return _calls(request, [_done(finals, v.succeeded[:FINALS])])
        if again := _again(request, v):
            return _calls(request, again)
        if busy or v.succeeded:
            return _text(v, _say(v, "generating", n=FINALS), request)
        chosen = next((a[3] for a in reversed(v.answers) if a[2] == "select"), "")
        return _calls(request, [_final(v, fmt, chosen) for fmt in FORMATS])
    return _text(v, _say(v, "done"), request)


# --- reading ------------------------------------------------------------------------
def _read(request: ModelRequest, lang: str, person: str, latest: str) -> View:
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


def _answered(v: View, title_words: tuple[str, ...], action: str) -> str | None:
    for card_id, title, act, _ in v.answers:
        if act == action and any(w in title for w in title_words):
            return card_id
    for r in v.results:
        if '"status": "approved"' in r:
            return "approved"
    return None


# --- acting -------------------------------------------------------------------------
Call = tuple[str, dict[str, object]]


def _plan(v: View) -> list[Call]:
    titles = _PLAN[v.lang]
    add = [{"title": t, "requires_confirmation": n == 2} for n, t in enumerate(titles)]
    price = CATALOGUE[DEFAULT_MODEL["image"]].price_cents * (DRAFTS + FINALS)
    purpose = (
        f"{DRAFTS} Entwürfe und {FINALS} finale Plakate"
        if v.lang == "de"
        else f"{DRAFTS} drafts and {FINALS} final posters"
    )
    return [
        ("update_checklist", {"add": add}),
        ("request_budget", {"amount_cents": price, "purpose": purpose}),
    ]


def _drafts(v: View) -> list[Call]:
    styles = ("sunset orange", "teal and cream", "mustard and brown", "faded red")
    return [
        (
            "generate_image",
            {
                "prompt": f"Retro brand poster, draft {n + 1}, {styles[n]}: {v.person[:200]}",
                "model": DEFAULT_MODEL["image"],
            },
        )
        for n in range(DRAFTS)
    ]


def _again(request: ModelRequest, v: View) -> list[Call]:
    """A job that failed (refunded; never resubmitted by the platform) is ordered again,
    as a new call with the failed call's input, read from the history. The failure line
    is shown once, so this is the step that must act on it, busy or not."""
    calls: list[Call] = []
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
            calls.append((use.name, dict(use.input)))
    return calls


def _final(v: View, fmt: str, chosen: str) -> Call:
    return (
        "generate_image",
        {
            "prompt": f"Final retro brand poster ({fmt}) based on the chosen draft {chosen}",
            "model": DEFAULT_MODEL["image"],
        },
    )


def _warmer(v: View, pick: Item | None) -> list[Call]:
    title = (
        "Wärmere Variante des gewählten Plakats"
        if v.lang == "de"
        else ("Warmer variant of the chosen poster")
    )
    base = next((a[3] for a in reversed(v.answers) if a[2] == "select"), "")
    return [
        ("update_checklist", {"add": [{"title": title}]}),
        (
            "generate_image",
            {
                "prompt": f"The chosen retro poster {base}, a bit warmer: more orange and red",
                "model": DEFAULT_MODEL["image"],
            },
        ),
    ]


def _done(item: Item, artifacts: list[str] | None = None, card: str | None = None) -> Call:
    upd: dict[str, object] = {"id": item.id, "status": "done"}
    if artifacts:
        upd["artifacts"] = artifacts
    if card and card != "approved":
        upd["card_id"] = card
    elif card == "approved":
        upd["note"] = "budget approved by the person"
    return ("update_checklist", {"update": [upd]})


_SAY = {
    "budget_wait": (
        "I've asked you to approve the budget for the drafts.",
        "Ich habe dich um die Freigabe des Budgets für die Entwürfe gebeten.",
    ),
    "generating": (
        "Generating {n} images; they appear here when ready.",
        "Ich generiere {n} Bilder; sie erscheinen hier, sobald sie fertig sind.",
    ),
    "drafts_wait": ("The drafts are still being generated.", "Die Entwürfe werden noch generiert."),
    "pick": ("Which draft do you like best?", "Welcher Entwurf gefällt dir am besten?"),
    "done": ("The poster series is finished.", "Die Plakatserie ist fertig."),
    "warmer_wait": ("The warmer variant is on its way.", "Die wärmere Variante entsteht."),
}


def _say(v: View, key: str, **kw: object) -> str:
    en, de = _SAY[key]
    return (de if v.lang == "de" else en).format(**kw)


def _text(v: View, text: str, request: ModelRequest) -> ModelResponse:
    return ModelResponse(
        content=[TextBlock(text=text)],
        stop_reason="end_turn",
        usage=Usage(input_tokens=_tokens(request), output_tokens=len(text) // 4 + 1),
        model="lomo-offline",
    )


def _calls(request: ModelRequest, calls: list[Call]) -> ModelResponse:
    base = f"toolu_{request.purpose}_{len(request.messages):04d}"
    return ModelResponse(
        content=[
            ToolUseBlock(id=f"{base}_{n}", name=name, input=args)
            for n, (name, args) in enumerate(calls)
        ],
        stop_reason="tool_use",
        usage=Usage(input_tokens=_tokens(request), output_tokens=40 * len(calls)),
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
_FORGET = re.compile(
    r"^\s*(?:please\s+)?(?:forget|vergiss)\s*,?\s*(?:that|dass)?\s*(?P<what>.+?)[.!]?\s*$",
    re.IGNORECASE,
)


def forget_step(request: ModelRequest, person: list[str]) -> ModelResponse | None:
    """ "Forget that our brand colour is blue": ask on a forget card (the memory service
    acts only on the person's confirmation), then say what happened."""
    if not person or recognise(person[0]).intent != "forget":
        return None
    m = _FORGET.match(person[0])
    what = m.group("what") if m else person[0].strip(" .!")
    lang = detect_language(person[0])
    tail = next(
        (
            b.text
            for b in (request.messages[-1].content if request.messages else [])
            if isinstance(b, TextBlock) and b.text.startswith("[runtime]")
        ),
        "",
    )
    answer = _ANSWER.search(tail)
    if answer is None:
        return _calls(request, [("forget_memory", {"text": what})])
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

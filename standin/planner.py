"""The offline stand-in's planner for multi-part work, for any subject and any mix of
media: posters and a jingle, a video ad with its music, a storyboard and its clip, a
book, a brand kit. English and German.

The plan is derived from the opening request (and the person's answer to a question about
it), the same way on every step. Its parts are what the request names (standin/parts.py):
each named part is a final step of its own, in the order named, with its count, medium
and length. A form (series, book, brand kit, film), read by meaning from the nearest
labelled examples in `standin/examples/plans.jsonl`, fills in only what the request leaves
open: which parts when none is named, how many pieces when a part has no number. Every
plan has the same shape: a budget for the whole plan on a price card, drafts of the look
(in parallel; sketches in sound for a plan of audio only), the person's pick on a select
card, then its final parts one after the other (each part's pieces in parallel, from the
chosen draft). A length the catalogue cannot make in one piece is made of pieces that add
up to it, and the plan says so. Counts that contradict each other, more pieces than a plan
holds and media the catalogue cannot make are asked about before anything is planned. A
later change after the plan is finished adds a step and a variant of the chosen draft.

Defaults where the request names no part: a series has 3 finals (or one per named format)
after 4 drafts; a book a cover and 4 pages; a brand kit a logo, a palette card and a
business card; a film 4 storyboard frames and one clip.
"""

from __future__ import annotations

import json
import math
import re
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from llm.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock
from money.catalogue import CATALOGUE, DEFAULT_MODEL
from standin.intents import MEDIA, load_examples, plain_form, recognise
from standin.parts import Named, Reading, read
from standin.requested import requested, work_name
from standin.tasks import (
    Call,
    Item,
    View,
    again,
    answered,
    calls,
    done,
    read_view,
    reply,
)
from vectors.embeddings import Embedder, shared_embedder

FORMS = ("series", "book", "brand_kit", "film")
EXAMPLES = Path(__file__).parent / "examples" / "plans.jsonl"
SERIES_DRAFTS, DRAFTS = 4, 3
SERIES_FINALS, BOOK_PAGES, FILM_FRAMES, CLIP_S, AUDIO_S, SKETCH_S = 3, 4, 4, 6, 10, 5
MAX_PIECES = 12  # one part's pieces
MAX_PLAN = 20  # pieces in all the finals of one plan
_DIRECTIONS = ("warm palette", "cool palette", "bold contrast", "soft pastel")
# The guide a form of plan brings beside its media's guides.
_FORM_GUIDE = {"series": "poster-series", "film": "storyboard-film"}
_GUIDE_SHOWN = re.compile(r"^\[runtime\] guide (\S+) \(loaded\)", re.MULTILINE)
_PLURAL = {
    "image": ("pictures", "Bilder"),
    "video": ("videos", "Videos"),
    "audio": ("audio clips", "Audios"),
    "3d": ("3D models", "3D-Modelle"),
}
# Nouns that name a whole work of a form, not one piece of it ("a short film").
_WORK_NOUNS = {"film": "film", "movie": "film"}


@dataclass(frozen=True)
class Part:
    """One final step of the plan: its title (in the person's language), its medium and
    one prompt per piece, with each piece's length where the medium has one."""

    title: str
    medium: str
    prompts: tuple[str, ...]
    durations: tuple[int | None, ...] = ()

    def duration(self, k: int) -> int | None:
        return self.durations[k] if k < len(self.durations) else None


@dataclass(frozen=True)
class Question:
    """What must be settled before a plan can be priced: its card and why."""

    why: str  # contradiction | too_many | unsupported
    kind: str  # the card: confirm | select | clarify
    title: str
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Plan:
    form: str
    name: str  # the work in the person's words, without ids
    lang: str
    drafts: tuple[str, ...]  # one prompt per draft
    parts: tuple[Part, ...]
    draft_medium: str = "image"
    question: Question | None = None

    @property
    def price_cents(self) -> int:
        draft = CATALOGUE[DEFAULT_MODEL[self.draft_medium]].price_cents
        pieces = sum(
            CATALOGUE[DEFAULT_MODEL[p.medium]].price_cents * len(p.prompts) for p in self.parts
        )
        return draft * len(self.drafts) + pieces

    def steps(self) -> list[dict[str, object]]:
        """The checklist: budget, drafts, the person's pick, then one step per part."""
        de = self.lang == "de"
        n = len(self.drafts)
        head = (
            (
                "Budget für den Plan abstimmen",
                f"{n} Entwürfe generieren",
                "Lieblingsentwurf auswählen",
            )
            if de
            else (
                "Agree on the budget for the plan",
                f"Generate {n} drafts",
                "Pick a favourite draft",
            )
        )
        titles = [*head, *(p.title for p in self.parts)]
        return [{"title": t, "requires_confirmation": k == 2} for k, t in enumerate(titles)]

    def guides(self, offered: list[str]) -> list[str]:
        """The offered creative guides for what the plan pays for: every medium it makes
        (the drafts too) and the guide of its form, in the order offered."""
        finals = {p.medium for p in self.parts}
        wanted = {self.draft_medium, *finals}
        if self.form == "film" or (self.form == "series" and finals == {"image"}):
            wanted.add(_FORM_GUIDE[self.form])
        return [g for g in offered if g in wanted]

    def summary(self) -> str:
        """What the plan makes, in words: "3 drafts, then 1 cover, 4 pages"."""
        parts = ", ".join(p.title for p in self.parts)
        n = len(self.drafts)
        return f"{n} Entwürfe, dann {parts}" if self.lang == "de" else f"{n} drafts, then {parts}"


# --- the plan from the request ---------------------------------------------------------
class Nearest:
    """A label by the nearest centre of its labelled examples: the mean of a label's
    examples says what they share, where the single closest example often shares only a
    topic with the request ("short videos for our app launch" sits next to an app jingle)."""

    def __init__(self, embedder: Embedder, examples: list[tuple[str, str]]) -> None:
        self._embedder = embedder
        vectors = np.array(embedder.embed([t for t, _ in examples]))
        labels = [label for _, label in examples]
        self.labels = tuple(dict.fromkeys(labels))
        mask = np.array(labels)
        self._centres = np.array([vectors[mask == x].mean(axis=0) for x in self.labels])

    def label(self, text: str) -> str:
        # Read as the recogniser reads: the mean of the text and its casual plain form.
        vec = np.array(self._embedder.embed([text, plain_form(text)])).mean(axis=0)
        return self.labels[int(np.argmax(self._centres @ vec))]


_readers: dict[str, Nearest] = {}
_lock = threading.Lock()


def _reader(kind: str) -> Nearest:
    """The plan's forms over plans.jsonl; the media over the recogniser's examples of
    single pieces (multi-part requests read as "multipart" there, whatever their medium)."""
    with _lock:
        if kind not in _readers:
            if kind == "form":
                rows = [json.loads(x) for x in EXAMPLES.read_text("utf-8").splitlines() if x]
                pairs = [(str(r["text"]), str(r["form"])) for r in rows]
            else:
                pairs = [(t, i) for t, i in load_examples() if i in MEDIA]
            _readers[kind] = Nearest(shared_embedder("usem"), pairs)
        return _readers[kind]


def form_of(text: str) -> str:
    return _reader("form").label(text)


def medium_of(text: str) -> str:
    return _reader("medium").label(text)


def plan_of(opening: str, lang: str, choice: str = "") -> Plan:
    """The plan for an opening request; the same request (and answer) always gives the
    same plan. `choice` is the person's answer to the plan's question, if any."""
    brief = " ".join(opening.split())[:200]
    de = lang == "de"
    reading = read(opening)
    # "A short film" names the work, not a piece: beside other parts it is their subject,
    # alone the film form's defaults make it.
    named = [p for p in reading.parts if p.stem not in _WORK_NOUNS]
    form = _form(opening, named)
    question = _question(reading, named, de)
    if question is not None:
        named, settled = _settle(named, question, choice)
        if not settled:
            return Plan(form, work_name(opening), lang, (), (), question=question)
    if named:
        parts = _named_parts(named, brief, de, form)
    else:
        fill = {"book": _book, "brand_kit": _brand_kit, "film": _film}.get(form, _series)
        parts = fill(opening, brief, de)
    audio_only = all(p.medium == "audio" for p in parts)
    n_drafts = SERIES_DRAFTS if form == "series" and not audio_only else DRAFTS
    what = _draft_word(form, named)
    drafts = tuple(
        f"{what} draft {k + 1}, {_DIRECTIONS[k % len(_DIRECTIONS)]}: {brief}"
        for k in range(n_drafts)
    )
    medium = "audio" if audio_only else "image"
    return Plan(form, work_name(opening), lang, drafts, parts, medium)


def _form(opening: str, named: list[Named]) -> str:
    """The form by meaning; a request that names only pictures of one kind is a series
    whatever its subject (a brand, a shop and a website are subjects, not forms)."""
    if named and all(p.medium == "image" for p in named) and len({p.stem for p in named}) == 1:
        return "book" if named[0].stem in ("page", "seite") else "series"
    return form_of(opening)


def _draft_word(form: str, named: list[Named]) -> str:
    if named:
        return named[0].word
    return {"book": "Cover", "brand_kit": "Logo", "film": "Key frame"}.get(form, "Look")


# --- what must be asked first ----------------------------------------------------------
_LIMIT_SAY = (
    "A plan holds at most {one} pieces of one part and {all} in all, and this asks for {n}. "
    "Shall I plan the first {first} now? The rest can follow in a next plan.",
    "Ein Plan umfasst höchstens {one} Stücke je Teil und {all} insgesamt, hier sind es {n}. "
    "Soll ich jetzt die ersten {first} planen? Der Rest kann in einem nächsten Plan folgen.",
)
_CONFLICT_SAY = (
    "The request names {counts} pieces: how many shall I make?",
    "Die Anfrage nennt {counts} Stück: wie viele soll ich machen?",
)
_UNSUPPORTED_SAY = (
    "I can't make {what} here: I make pictures, video clips, audio and 3D models. "
    "Shall I plan {rest} without it?",
    "{what} kann ich hier nicht machen: ich mache Bilder, Videoclips, Audio und 3D-Modelle. "
    "Soll ich {rest} ohne das planen?",
)
_NOTHING_SAY = (
    "I can't make {what} here: I make pictures, video clips, audio and 3D models. "
    "What shall I make instead?",
    "{what} kann ich hier nicht machen: ich mache Bilder, Videoclips, Audio und 3D-Modelle. "
    "Was soll ich stattdessen machen?",
)


def _question(reading: Reading, named: list[Named], de: bool) -> Question | None:
    if reading.conflicts:
        counts = sorted({n for pair in reading.conflicts for n in pair})
        said = (" oder " if de else " or ").join(str(n) for n in counts)
        options = tuple((f"count:{n}", str(n)) for n in counts)
        return Question("contradiction", "select", _CONFLICT_SAY[de].format(counts=said), options)
    if reading.unsupported:
        what = ", ".join(dict.fromkeys(reading.unsupported))
        what = what[:1].upper() + what[1:] if de else what  # it opens the German sentence
        if not named:
            return Question("unsupported", "clarify", _NOTHING_SAY[de].format(what=what))
        rest = ", ".join(_title(p, p.count or 1, de) for p in named)
        return Question("unsupported", "confirm", _UNSUPPORTED_SAY[de].format(what=what, rest=rest))
    counts = [p.count or 1 for p in named]
    if any(n > MAX_PIECES for n in counts) or sum(counts) > MAX_PLAN:
        first = sum(_capped(counts))
        title = _LIMIT_SAY[de].format(one=MAX_PIECES, all=MAX_PLAN, n=sum(counts), first=first)
        return Question("too_many", "confirm", title)
    return None


def _capped(counts: list[int]) -> list[int]:
    """Counts within the limits: each part at most MAX_PIECES, the largest cut first until
    the plan holds at most MAX_PLAN."""
    out = [min(n, MAX_PIECES) for n in counts]
    while sum(out) > MAX_PLAN:
        k = out.index(max(out))
        out[k] -= 1
    return out


def _settle(named: list[Named], q: Question, choice: str) -> tuple[list[Named], bool]:
    """The parts once the person answered the question; (parts, False) while unanswered
    or declined."""
    if not choice or choice == "reject":
        return named, False
    if q.why == "contradiction" and choice.startswith("count:"):
        n = int(choice.split(":", 1)[1])
        first = replace(named[0], count=n)
        return [first, *(p for p in named[1:] if p.stem != first.stem)], True
    if q.why == "too_many" and choice == "confirm":
        capped = _capped([p.count or 1 for p in named])
        return [replace(p, count=n) for p, n in zip(named, capped, strict=True)], True
    if q.why == "unsupported" and choice == "confirm":
        return named, bool(named)
    return named, False


# --- the parts -------------------------------------------------------------------------
_LIMITS = {"video": (2, 10), "audio": (1, 30)}


def _named_parts(named: list[Named], brief: str, de: bool, form: str) -> tuple[Part, ...]:
    video_s = next((p.duration_s for p in named if p.medium == "video" and p.duration_s), None)
    out = []
    for p in named:
        n = p.count or (_default_count(p, form) if p.plural else 1)
        n = min(n, MAX_PIECES)
        seconds = p.duration_s
        if seconds is None and p.medium == "audio":
            seconds = min(video_s or AUDIO_S, _LIMITS["audio"][1])  # music as long as its film
        elif seconds is None and p.medium == "video":
            seconds = CLIP_S
        prompts, durations, note = _pieces_of(p, n, seconds, brief, de)
        out.append(Part(_title(p, n, de, seconds) + note, p.medium, prompts, durations))
    return tuple(out)


def _default_count(p: Named, form: str) -> int:
    if p.stem in ("page", "seite"):
        return BOOK_PAGES
    if p.stem in ("frame", "storyboard"):
        return FILM_FRAMES
    return SERIES_FINALS


def _pieces_of(
    p: Named, n: int, seconds: int | None, brief: str, de: bool
) -> tuple[tuple[str, ...], tuple[int | None, ...], str]:
    """Each piece's prompt and length; a length longer than the catalogue's model makes
    in one piece becomes pieces that add up to it (said in the step's title)."""
    fmt = f", {', '.join(p.formats)}" if p.formats else ""
    if seconds is None or p.medium not in _LIMITS:
        whole = tuple(f"{p.word} {k} of {n}{fmt}: {brief}" for k in range(1, n + 1))
        return whole, (), ""
    lo, hi = _LIMITS[p.medium]
    seconds = max(lo, seconds)
    split = math.ceil(seconds / hi)
    lengths = [seconds // split + (1 if k < seconds % split else 0) for k in range(split)]
    prompts: list[str] = []
    durations: list[int | None] = []
    for k in range(1, n + 1):
        for j, length in enumerate(lengths, 1):
            piece = f" (piece {j} of {split}, {length} s)" if split > 1 else ""
            prompts.append(f"{p.word} {k} of {n}{fmt}{piece}: {brief}")
            durations.append(length)
    note = ""
    if split > 1:
        each = "/".join(str(x) for x in dict.fromkeys(lengths))
        note = f" (aus {split} Clips à {each} s)" if de else f" (made of {split} clips of {each} s)"
    return tuple(prompts), tuple(durations), note


def _title(p: Named, n: int, de: bool, seconds: int | None = None) -> str:
    length = ""
    if seconds and p.medium in _LIMITS:
        length = f" von {seconds} s" if de else f" of {seconds} s"
    return f"{n} {p.word}{length}"


def _count(text: str, default: int) -> int:
    return max(1, min(MAX_PIECES, requested(text).count or default))


def _book(text: str, brief: str, de: bool) -> tuple[Part, ...]:
    pages = _count(text, BOOK_PAGES)
    return (
        Part("Umschlag" if de else "Cover", "image", (f"Book cover: {brief}",)),
        Part(
            f"{pages} Seiten" if de else f"{pages} pages",
            "image",
            tuple(f"Book page {k} of {pages}: {brief}" for k in range(1, pages + 1)),
        ),
    )


def _brand_kit(text: str, brief: str, de: bool) -> tuple[Part, ...]:
    names = (
        ("Logo", "Logo"),
        ("Farbpaletten-Karte", "Colour palette card"),
        ("Visitenkarte", "Business card"),
    )
    return tuple(Part(d if de else e, "image", (f"{e}: {brief}",)) for d, e in names)


def _film(text: str, brief: str, de: bool) -> tuple[Part, ...]:
    frames = _count(text, FILM_FRAMES)
    seconds = max(2, min(10, requested(text).duration_s or CLIP_S))
    return (
        Part(
            f"{frames} Storyboard-Bilder" if de else f"{frames} storyboard frames",
            "image",
            tuple(f"Storyboard frame {k} of {frames}: {brief}" for k in range(1, frames + 1)),
        ),
        Part(
            f"Clip von {seconds} Sekunden" if de else f"A {seconds}-second clip",
            "video",
            (f"Film clip: {brief}",),
            (seconds,),
        ),
    )


def _series(text: str, brief: str, de: bool) -> tuple[Part, ...]:
    wanted = requested(text)
    medium = medium_of(text)
    n = _count(text, len(wanted.formats) if len(wanted.formats) > 1 else SERIES_FINALS)
    noun = wanted.piece or _PLURAL[medium][de]
    title = f"{n} finale {noun}" if de else f"{n} final {noun}"
    fmts = wanted.formats or [""]
    prompts = tuple(
        f"Piece {k + 1} of {n}{', ' + fmts[k % len(fmts)] if fmts[0] else ''}: {brief}"
        for k in range(n)
    )
    seconds = None
    if medium in ("video", "audio"):
        seconds = max(2, min(10, wanted.duration_s or CLIP_S))
    return (Part(title, medium, prompts, (seconds,) * n if seconds else ()),)


def choice_of(request: ModelRequest, plan: Plan, v: View, opening: str) -> str:
    """The person's answer to the plan's question: `count:N`, `confirm`, `reject`, or ""
    while unanswered. The answer is in the runtime's lines of one step only; after that
    the checklist built from it says which it was (the plan that answer gives has those
    steps), or that the plan was declined."""
    q = plan.question
    if q is None:
        return ""
    for a in v.answers:
        if a[1] and a[1] == q.title[: len(a[1])]:
            return a[3] if a[2] == "select" and a[3] else a[2]
    if not v.items:
        return ""
    if v.items[0].title in _DECLINED:
        return "reject"
    titles = [i.title for i in v.items]
    for choice in [*(i for i, _ in q.options), "confirm"]:
        steps = plan_of(opening, plan.lang, choice).steps()
        if steps and [str(x["title"]) for x in steps] == titles[: len(steps)]:
            return choice
    return ""


_DECLINED = ("Nothing to make: declined", "Nichts zu machen: abgelehnt")


# --- the steps ------------------------------------------------------------------------
def plan_step(request: ModelRequest, lang: str, person: list[str]) -> ModelResponse:
    """The next move of a multi-part task, read off the checklist and the runtime's lines."""
    v = read_view(request, lang, " ".join(person), person[-1])
    plan = plan_of(person[0], lang)
    choice = choice_of(request, plan, v, person[0])
    if choice == "reject":
        return _declined(request, plan, v)
    plan = plan_of(person[0], lang, choice) if choice else plan
    if not v.items and plan.question is not None:
        return _ask(request, plan, person)
    if not v.items:
        # The system text's rule: read the matching guides before planning paid work.
        wanted = plan.guides(offered_guides(request))
        if missing := [g for g in wanted if g not in loaded_guides(request)]:
            return calls(request, [("load_guide", {"name": g}) for g in missing])
        ask = {"amount_cents": plan.price_cents, "purpose": plan.summary()}
        return calls(
            request, [("update_checklist", {"add": plan.steps()}), ("request_budget", ask)]
        )
    budget, drafts, pick = v.items[0], v.items[1], v.items[2]
    parts = v.items[3 : 3 + len(plan.parts)]
    extra = v.items[3 + len(plan.parts) :]
    if budget.status != "done":
        card = answered(v, ("Budget",), "confirm")
        if card is None:
            price = f"{plan.price_cents / 100:.2f} EUR"
            return reply(_say(plan, "budget_wait", steps=plan.summary(), price=price), request)
        return calls(request, [done(budget, card=card), *_drafts(plan)])
    if drafts.status != "done":
        return _drafts_step(request, plan, v, drafts, pick)
    if pick.status != "done":
        return reply(_say(plan, "pick"), request)
    chosen = _chosen(v, drafts, pick)
    for n, (item, part) in enumerate(zip(parts, plan.parts, strict=False)):
        if item.status != "done":
            record = [] if pick.artifacts or not chosen else [done(pick, [chosen])]
            return _part_step(request, plan, v, item, part, chosen, record, plan.parts[n + 1 :])
    if later := _later(request, plan, v, extra, chosen, person[0]):
        return later
    return reply(_say(plan, "finished", parts=plan.summary()), request)


def _ask(request: ModelRequest, plan: Plan, person: list[str]) -> ModelResponse:
    """The plan's question on a card, once, after the guides of what it would make (the
    answer shows for one step, which then plans at once); while it waits, say so. A request
    of nothing the catalogue makes is planned anew from the person's next words."""
    q = plan.question
    assert q is not None
    if q.kind == "clarify" and len(person) > 1:
        return plan_step(request, plan.lang, person[1:])
    if any(
        isinstance(b, ToolUseBlock) and b.name == "ask_person" and b.input.get("title") == q.title
        for m in request.messages
        for b in m.content
    ):
        return reply(q.title, request)
    likely = plan_of(person[0], plan.lang, q.options[0][0] if q.options else "confirm")
    wanted = likely.guides(offered_guides(request)) if likely.parts else []
    if missing := [g for g in wanted if g not in loaded_guides(request)]:
        return calls(request, [("load_guide", {"name": g}) for g in missing])
    args: dict[str, object] = {"kind": q.kind, "title": q.title}
    if q.options:
        args["options"] = [{"id": i, "label": label} for i, label in q.options]
    return calls(request, [("ask_person", args)])


def _declined(request: ModelRequest, plan: Plan, v: View) -> ModelResponse:
    """Declined: one step says so and is skipped, so the task ends instead of waiting on
    the person with nothing to answer."""
    if not v.items:
        title = _DECLINED[plan.lang == "de"]
        return calls(request, [("update_checklist", {"add": [{"title": title}]})])
    step = v.items[0]
    if step.status not in ("skipped", "done"):
        return calls(
            request, [("update_checklist", {"update": [{"id": step.id, "status": "skipped"}]})]
        )
    return reply(_say(plan, "declined"), request)


def offered_guides(request: ModelRequest) -> list[str]:
    """The guides the request's `load_guide` tool offers (none without the tool)."""
    for t in request.tools:
        if t.name == "load_guide":
            names = t.input_schema.get("properties", {}).get("name", {}).get("enum", [])
            return [str(n) for n in names]
    return []


def loaded_guides(request: ModelRequest) -> set[str]:
    """The guides in the request's history: loaded by a call, or shown by the runtime (with
    a domain, or carried over a segment close)."""
    names = set()
    for m in request.messages:
        for b in m.content:
            if isinstance(b, ToolUseBlock) and b.name == "load_guide":
                names.add(str(b.input.get("name", "")))
            elif isinstance(b, TextBlock):
                names.update(_GUIDE_SHOWN.findall(b.text))
    return names


def _drafts_step(
    request: ModelRequest, plan: Plan, v: View, drafts: Item, pick: Item
) -> ModelResponse:
    """The drafts are made; once all exist, the person picks one on a select card."""
    n = len(plan.drafts)
    if len(v.succeeded) < n:
        if retry := again(request, v):
            return calls(request, retry)
        return reply(_say(plan, "making", what=drafts.title), request)
    word = "Entwurf" if plan.lang == "de" else "Draft"
    options = [{"id": obj, "label": f"{word} {k + 1}"} for k, obj in enumerate(v.succeeded[:n])]
    ask: Call = (
        "ask_person",
        {"kind": "select", "title": _say(plan, "pick"), "options": options, "item_id": pick.id},
    )
    return calls(request, [done(drafts, v.succeeded[:n]), ask])


def _part_step(
    request: ModelRequest,
    plan: Plan,
    v: View,
    item: Item,
    part: Part,
    chosen: str,
    record: list[Call],
    rest: tuple[Part, ...],
) -> ModelResponse:
    """A final part: its pieces are ordered together from the chosen draft; once all
    exist the step is done and the next part is ordered in the same breath."""
    if len(v.succeeded) >= len(part.prompts):
        following = _pieces(rest[0], chosen) if rest else []
        return calls(request, [*record, done(item, v.succeeded[: len(part.prompts)]), *following])
    if retry := again(request, v):
        return calls(request, retry)
    if v.waiting or v.succeeded:
        return reply(_say(plan, "making", what=item.title), request)
    return calls(request, [*record, *_pieces(part, chosen)])


def _later(
    request: ModelRequest, plan: Plan, v: View, extra: list[Item], chosen: str, opening: str
) -> ModelResponse | None:
    """A change asked for after the plan is finished: a step of its own and a variant of
    the chosen draft; while it is being made, say so; once it exists, mark it done."""
    for item in extra:
        if item.status != "done":
            if v.succeeded and not v.waiting:
                return calls(request, [done(item, v.succeeded[:1])])
            if retry := again(request, v):
                return calls(request, retry)
            return reply(_say(plan, "making", what=item.title), request)
    latest = v.latest.strip()
    if latest == opening.strip() or recognise(latest).intent not in ("change", *MEDIA):
        return None
    title = ("Variante: " if plan.lang == "de" else "Variant: ") + work_name(latest)
    if any(i.title == title for i in extra):
        return reply(_say(plan, "variant_ready", what=title), request)
    args: dict[str, object] = {"prompt": f"{latest} ({plan.name})", "model": DEFAULT_MODEL["image"]}
    if chosen:
        args["reference_object_id"] = chosen
    return calls(
        request, [("update_checklist", {"add": [{"title": title}]}), ("generate_image", args)]
    )


def _drafts(plan: Plan) -> list[Call]:
    medium = plan.draft_medium
    args: dict[str, object] = {"model": DEFAULT_MODEL[medium]}
    if medium == "audio":
        args["duration_s"] = SKETCH_S  # a sketch of the sound, not the piece
    return [(f"generate_{medium}", {"prompt": p, **args}) for p in plan.drafts]


def _pieces(part: Part, chosen: str) -> list[Call]:
    """A part's pieces, each from the chosen draft where its model takes a reference."""
    model = DEFAULT_MODEL[part.medium]
    out: list[Call] = []
    for k, prompt in enumerate(part.prompts):
        args: dict[str, object] = {
            "prompt": f"{prompt}; in the style of the chosen draft",
            "model": model,
        }
        if chosen and CATALOGUE[model].reference_image:
            args["reference_object_id"] = chosen
        if (seconds := part.duration(k)) is not None:
            args["duration_s"] = seconds
        out.append((f"generate_{part.medium}", args))
    return out


def _chosen(v: View, drafts: Item, pick: Item) -> str:
    """The draft the person picked: kept on the pick step once the finals start; before,
    the select card's answer in this step's lines."""
    if pick.artifacts:
        return pick.artifacts[0]
    option = next((a[3] for a in reversed(v.answers) if a[2] == "select" and a[3]), "")
    return option or (drafts.artifacts[0] if drafts.artifacts else "")


_SAY = {
    "budget_wait": (
        "I've planned “{name}”: {steps}. It costs {price} in all; nothing is made before you "
        "confirm the price card.",
        "Ich habe „{name}“ geplant: {steps}. Das kostet insgesamt {price}; es entsteht nichts, "
        "bevor du die Preiskarte bestätigst.",
    ),
    "making": (
        "Working on “{what}” for “{name}”; the results appear here when they are ready.",
        "Ich arbeite an „{what}“ für „{name}“; die Ergebnisse erscheinen hier, sobald sie "
        "fertig sind.",
    ),
    "pick": (
        "Which draft for “{name}” do you like best?",
        "Welcher Entwurf für „{name}“ gefällt dir am besten?",
    ),
    "finished": (
        "“{name}” is finished ({parts}); everything is with this task's results.",
        "„{name}“ ist fertig ({parts}); alles liegt bei den Ergebnissen dieser Aufgabe.",
    ),
    "declined": (
        "Alright, nothing is made for “{name}”.",
        "Gut, für „{name}“ wird nichts gemacht.",
    ),
    "variant_ready": (
        "“{what}” for “{name}” is ready; it is with this task's results.",
        "„{what}“ für „{name}“ ist fertig; es liegt bei den Ergebnissen dieser Aufgabe.",
    ),
}


def _say(plan: Plan, key: str, **kw: object) -> str:
    en, de = _SAY[key]
    return (de if plan.lang == "de" else en).format(name=plan.name, **kw)

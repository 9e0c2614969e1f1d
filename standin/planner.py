"""The offline stand-in's planner for multi-part work, for any subject: a series, a
campaign, a book, a film, a brand kit. English and German.

The plan is derived from the opening request alone, the same way on every step: its form
(series, book, brand kit, film) by meaning, the nearest labelled examples in
`standin/examples/plans.jsonl` under the multilingual embedder; how many pieces, which
medium, how long and which formats from the request's words (standin/requested.py). Every
plan has the same shape: a budget for the whole plan on a price card, drafts of the look
(in parallel), the person's pick on a select card, then its final parts one after the
other (each part's pieces in parallel, from the chosen draft). A later change after the
plan is finished adds a step and a variant of the chosen draft.

Defaults where the request names no number: a series has 3 finals (or one per named
format) after 4 drafts; a book a cover and 4 pages; a brand kit a logo, a palette card and
a business card; a film 4 storyboard frames and one clip.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llm.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock
from money.catalogue import CATALOGUE, DEFAULT_MODEL
from standin.intents import MEDIA, load_examples, plain_form, recognise
from standin.requested import requested, work_name
from standin.tasks import Call, Item, View, again, answered, calls, done, read_view, reply
from vectors.embeddings import Embedder, shared_embedder

FORMS = ("series", "book", "brand_kit", "film")
EXAMPLES = Path(__file__).parent / "examples" / "plans.jsonl"
SERIES_DRAFTS, DRAFTS = 4, 3
SERIES_FINALS, BOOK_PAGES, FILM_FRAMES, CLIP_S = 3, 4, 4, 6
MAX_PIECES = 12  # one part's pieces; a longer book is planned by a real model
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


@dataclass(frozen=True)
class Part:
    """One final step of the plan: its title (in the person's language), its medium and
    one prompt per piece."""

    title: str
    medium: str
    prompts: tuple[str, ...]
    duration_s: int | None = None


@dataclass(frozen=True)
class Plan:
    form: str
    name: str  # the work in the person's words, without ids
    lang: str
    drafts: tuple[str, ...]  # one prompt per draft picture
    parts: tuple[Part, ...]

    @property
    def price_cents(self) -> int:
        image = CATALOGUE[DEFAULT_MODEL["image"]].price_cents
        pieces = sum(
            CATALOGUE[DEFAULT_MODEL[p.medium]].price_cents * len(p.prompts) for p in self.parts
        )
        return image * len(self.drafts) + pieces

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
        """The offered creative guides for what the plan pays for: every medium it makes (the
        drafts are pictures) and the guide of its form, in the order offered."""
        finals = {p.medium for p in self.parts}
        wanted = {"image", *finals}
        if self.form == "film" or (self.form == "series" and finals == {"image"}):
            wanted.add(_FORM_GUIDE[self.form])
        return [g for g in offered if g in wanted]

    def summary(self) -> str:
        """What the plan makes, in words: "3 drafts, then Cover, 4 pages"."""
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


def plan_of(opening: str, lang: str) -> Plan:
    """The plan for an opening request; the same request always gives the same plan."""
    form = form_of(opening)
    brief = " ".join(opening.split())[:200]
    n_drafts = SERIES_DRAFTS if form == "series" else DRAFTS
    what = {"book": "Cover", "brand_kit": "Logo", "film": "Key frame"}.get(form, "Look")
    drafts = tuple(
        f"{what} draft {k + 1}, {_DIRECTIONS[k % len(_DIRECTIONS)]}: {brief}"
        for k in range(n_drafts)
    )
    parts = {"book": _book, "brand_kit": _brand_kit, "film": _film}.get(form, _series)
    return Plan(form, work_name(opening), lang, drafts, parts(opening, brief, lang == "de"))


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
            seconds,
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
    return (Part(title, medium, prompts, seconds),)


# --- the steps ------------------------------------------------------------------------
def plan_step(request: ModelRequest, lang: str, person: list[str]) -> ModelResponse:
    """The next move of a multi-part task, read off the checklist and the runtime's lines."""
    plan = plan_of(person[0], lang)
    v = read_view(request, lang, " ".join(person), person[-1])
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
    model = DEFAULT_MODEL["image"]
    return [("generate_image", {"prompt": p, "model": model}) for p in plan.drafts]


def _pieces(part: Part, chosen: str) -> list[Call]:
    """A part's pieces, each from the chosen draft where its model takes a reference."""
    model = DEFAULT_MODEL[part.medium]
    out: list[Call] = []
    for prompt in part.prompts:
        args: dict[str, object] = {
            "prompt": f"{prompt}; in the style of the chosen draft",
            "model": model,
        }
        if chosen and CATALOGUE[model].reference_image:
            args["reference_object_id"] = chosen
        if part.duration_s:
            args["duration_s"] = part.duration_s
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
    "variant_ready": (
        "“{what}” for “{name}” is ready; it is with this task's results.",
        "„{what}“ für „{name}“ ist fertig; es liegt bei den Ergebnissen dieser Aufgabe.",
    ),
}


def _say(plan: Plan, key: str, **kw: object) -> str:
    en, de = _SAY[key]
    return (de if plan.lang == "de" else en).format(name=plan.name, **kw)

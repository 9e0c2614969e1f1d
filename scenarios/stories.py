"""The stories, each in English and German: what the person says, what they mean by it
(which work, which decision a good router makes), which questions they expect, and how
many days pass in between. A story only drives; `figures.measure` judges afterwards.

"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from scenarios.person import Person, ScenarioFailure, Task, completed, has_open

Lines = dict[str, str]
Wording = dict[str, Lines]  # what the person says, by line name


def _t(en: str, de: str) -> Lines:
    return {"en": en, "de": de}


CAT = _t(
    "Generate an image of a red tabby cat", "Generiere ein Bild von einer roten getigerten Katze"
)
POSTERS = _t(
    "Make me a series of retro-style brand posters",
    "Erstelle bitte eine Serie von Retro-Plakaten für unsere Marke",
)
CAT_VIDEO = _t(
    "Turn yesterday's cat picture into a five-second video",
    "Mach aus dem Katzenbild von gestern ein Video von fünf Sekunden",
)
WARMER = _t(
    "Make the posters from last time a bit warmer", "Mach die Plakate vom letzten Mal etwas wärmer"
)
CUP = _t(
    "Create a 3D model of a ceramic coffee cup with a wooden handle",
    "Erstelle ein 3D-Modell einer Kaffeetasse aus Keramik mit Holzgriff",
)
CUP_TALLER = _t("Make the cup a bit taller", "Mach die Tasse etwas höher")
CAT_DARKER = _t("Make the cat a bit darker", "Mach die Katze etwas dunkler")
CUP_RESUME = _t(
    "Back to the ceramic coffee cup from last week: make the handle thinner",
    "Weiter mit der Kaffeetasse aus Keramik von letzter Woche: den Griff bitte dünner",
)
BRAND = _t("Our brand's main colour is blue.", "Die Hauptfarbe unserer Marke ist blau.")
BLUE = _t("blue", "blau")
GREEN_FACT = _t("The brand's main colour is green.", "Die Hauptfarbe der Marke ist grün.")
GREEN = _t("green", "grün")
MASCOT = _t("Generate an image of our brand mascot", "Generiere ein Bild unseres Maskottchens")
BICYCLE = _t("Generate an image of a bicycle", "Generiere ein Bild von einem Fahrrad")
FORGET = _t(
    "Forget that the brand's main colour is green",
    "Vergiss, dass die Hauptfarbe der Marke grün ist",
)
TEAPOT = _t("Generate an image of a teapot", "Generiere ein Bild von einer Teekanne")


def _artifacts(n: int) -> Callable[[Task], bool]:
    return lambda t: completed(t) and len(t["artifacts"]) >= n


def _context_has(p: Person, work: str, word: str) -> bool:
    layers = p.get(f"/v1/tasks/{p.journal.works[work]}/context").get("layers", [])
    return any(word.lower() in layer["text"].lower() for layer in layers)


def posters(p: Person, w: Wording) -> None:
    """The poster series: posters with a budget, four drafts and a selection, a cat video in
    between, and three days later "a bit warmer" in the same task, asking again because
    the approved budget is used up."""
    lang = p.lang
    p.say(w["CAT"][lang], "cat", "lightweight")
    p.until("cat", _artifacts(1))
    p.days_pass(1)
    p.say(w["POSTERS"][lang], "posters", "new")
    p.until("posters", has_open("select"), answers={"price": "confirm"})
    p.say(w["CAT_VIDEO"][lang], "video", "lightweight")
    p.until("posters", _artifacts(7), answers={"select": 1})
    p.until("video", _artifacts(1))
    p.days_pass(3)
    p.say(w["WARMER"][lang], "posters", "existing")
    t = p.until("posters", _artifacts(8), answers={"price": "confirm"})
    if len(t["checklist"]) != 5:
        raise ScenarioFailure(f"warmer step missing: {t['checklist']}")


def object_3d(p: Person, w: Wording) -> None:
    """A 3D object (below the free amount: no question), and the next day a change to it
    in the same task."""
    p.say(w["CUP"][p.lang], "cup", "lightweight")
    p.until("cup", _artifacts(1))
    p.days_pass(1)
    p.say(w["CUP_TALLER"][p.lang], "cup", "existing")
    p.until("cup", _artifacts(2))


def three_tasks(p: Person, w: Wording) -> None:
    """Three pieces of work in one conversation: the poster series waits on its budget
    while a cat picture and a 3D cup start; the person goes back and forth."""
    lang = p.lang
    p.say(w["POSTERS"][lang], "posters", "new")
    p.until("posters", has_open("price"))
    p.say(w["CAT"][lang], "cat", "lightweight")
    p.say(w["CUP"][lang], "cup", "lightweight")
    p.until("posters", has_open("select"), answers={"price": "confirm"})
    p.until("cat", _artifacts(1))
    p.say(w["CAT_DARKER"][lang], "cat", "existing")
    p.until("posters", _artifacts(7), answers={"select": 2})
    p.until("cup", _artifacts(1))
    p.until("cat", _artifacts(2))


def resume_by_description(p: Person, w: Wording) -> None:
    """Work from last week found by what it was, while newer work exists."""
    lang = p.lang
    p.say(w["CUP"][lang], "cup", "lightweight")
    p.until("cup", _artifacts(1))
    p.days_pass(3)
    p.say(w["CAT"][lang], "cat", "lightweight")
    p.until("cat", _artifacts(1))
    p.days_pass(4)
    p.say(w["CUP_RESUME"][lang], "cup", "existing")
    p.until("cup", _artifacts(2))


def correct_then_forget(p: Person, w: Wording) -> None:
    """A remembered brand colour is used, corrected by the person (the old value must not
    come back), then forgotten (the new one must not come back either)."""
    lang = p.lang
    p.say(w["BRAND"][lang], "", "answer")
    blue = p.wait_memory(w["BLUE"][lang])
    assert blue is not None
    p.say(w["MASCOT"][lang], "mascot", "lightweight")
    p.until("mascot", _artifacts(1))
    if not _context_has(p, "mascot", w["BLUE"][lang]):
        raise ScenarioFailure("the remembered colour never reached the task's context")
    p.days_pass(2)
    p.correct(blue["memory_id"], w["GREEN_FACT"][lang], (w["BLUE"][lang],))
    p.wait_memory(w["GREEN"][lang])
    p.say(w["BICYCLE"][lang], "bicycle", "lightweight")
    p.until("bicycle", _artifacts(1))
    if not _context_has(p, "bicycle", w["GREEN"][lang]):
        raise ScenarioFailure("the corrected colour never reached the next task's context")
    p.days_pass(1)
    said = p.say(w["FORGET"][lang], "forget", "lightweight")
    p.until("forget", has_open("forget"))
    p.forgotten((w["GREEN"][lang],), said.task_id)
    p.until("forget", completed, answers={"forget": "confirm"})
    p.wait_memory(w["GREEN"][lang], present=False)
    p.say(w["TEAPOT"][lang], "teapot", "lightweight")
    p.until("teapot", _artifacts(1))


def paid_again(p: Person, w: Wording) -> None:
    """Every price is asked (free amount 0): the same picture asked for four times, each
    price confirmed. The third ask promotes the picture task (the person keeps coming
    back), so the last two run in a persistent task without a plan; every paid picture
    must still reach the person with a reply, never a silent wait."""
    p.free_amount(0)
    for n in range(1, 5):
        p.say(w["CAT"][p.lang], "cat", "lightweight" if n == 1 else "existing")
        p.until("cat", _presented(p, n), answers={"price": "confirm"})


def _presented(p: Person, n: int) -> Callable[[Task], bool]:
    """The task holds `n` results, works on nothing, and replied after each was made (or
    asks the person on a card that says what)."""

    def shown(t: Task) -> bool:
        idle = t["status"] in ("completed", "waiting_user") and not t["waiting_on"]
        if not idle or len(t["artifacts"]) < n:
            return False
        if any(c["status"] == "open" and c["title"] for c in t["cards"]):
            return True
        events = p.events()
        replies = [
            e["seq"]
            for e in events
            if e["type"] == "task.reply" and e["data"]["task_id"] == t["task_id"]
        ]
        made = [
            e["seq"]
            for e in events
            if e["type"] == "object.version" and e["data"].get("object_id") in t["artifacts"]
        ]
        return bool(made) and bool(replies) and max(replies) > max(made)

    return shown


FILM = _t(
    "Make a short film from my storyboard {flow}",
    "Mach einen Kurzfilm aus meinem Storyboard {flow}",
)
SHOTS = {
    "en": ("a lighthouse at dusk", "waves against the rocks", "the lamp turning on", "a boat"),
    "de": (
        "ein Leuchtturm in der Dämmerung",
        "Wellen an den Felsen",
        "die Lampe geht an",
        "ein Boot",
    ),
}
RAINY = _t("the lamp turning on, in the rain", "die Lampe geht an, im Regen")


def storyboard(lang: str, shots: int) -> dict[str, object]:
    nodes: dict[str, object] = {
        f"shot{n + 1}": {
            "type": "video",
            "params": {"prompt": SHOTS[lang][n], "duration_s": 2},
            "inputs": [],
        }
        for n in range(shots)
    }
    nodes["cut"] = {"type": "edit", "params": {"prompt": "final cut"}, "inputs": list(nodes)}
    return nodes


def _film_ready(p: Person, flow: str) -> Callable[[Task], bool]:
    """Done when the task said so after a run that left nothing stale."""

    def ready(t: Task) -> bool:
        runs = p.runs(flow)
        clean = bool(runs) and runs[0]["status"] == "succeeded"
        clean = clean and not any(n["stale"] for n in runs[0]["nodes"].values())
        return clean and t["status"] in ("completed", "waiting_user") and not has_open("price")(t)

    return ready


def _run_status(p: Person, flow: str) -> str:
    runs = p.runs(flow)
    return str(runs[0]["status"]) if runs else ""


def short_film(p: Person, w: Wording) -> None:
    """A storyboard (three shots and a cut) becomes a short film: one price card for the
    whole run, and the task says when it is ready without being poked."""
    flow = p.create_flow("storyboard", storyboard(p.lang, 3))
    p.say(w["FILM"][p.lang].format(flow=flow), "film", "new")
    p.until("film", _film_ready(p, flow), answers={"price": "confirm"})
    run = p.runs(flow)[0]
    if run["progress"]["done"] != 4:
        raise ScenarioFailure(f"the film run did not make every node: {run['progress']}")


def edit_flow_mid_run(p: Person, w: Wording) -> None:
    """The person rewrites a shot while the agent's run is making the film: the shot that
    already ran is stale, and the agent redoes exactly that part (and the cut) by itself,
    asking once more for the price of just those."""
    flow = p.create_flow("storyboard", storyboard(p.lang, 4))
    p.simulator(latency_scale=30)  # a slow vendor: each clip takes seconds
    try:
        p.say(w["FILM"][p.lang].format(flow=flow), "film", "new")
        p.until("film", lambda t: _run_status(p, flow) == "running", answers={"price": "confirm"})
        p.wait_run(flow, lambda r: r["nodes"].get("shot3", {}).get("status") in ("running", "done"))
        p.edit_flow(
            flow,
            1,
            {
                "shot3": {
                    "type": "video",
                    "params": {"prompt": RAINY[p.lang], "duration_s": 2},
                    "inputs": [],
                }
            },
        )
    finally:
        p.simulator()
    p.until("film", _film_ready(p, flow), answers={"price": "confirm"})
    runs = p.runs(flow)
    if len(runs) < 2 or runs[0]["progress"]["reused"] < 3:
        raise ScenarioFailure(
            f"the stale part was not redone alone: {[r['progress'] for r in runs]}"
        )


NOTES = {
    "en": "Lighthouse notes\nColour: white\nPlace: the north cape\n",
    "de": "Notizen zum Leuchtturm\nFarbe: weiß\nOrt: das Nordkap\n",
}
NOTES_ASK = _t(
    "Generate an image of a lighthouse and add it to my notes {doc}",
    "Generiere ein Bild von einem Leuchtturm und füge es zu meinen Notizen {doc} hinzu",
)
RECOLOUR = {
    "en": ("Colour: white", "Colour: red and white"),
    "de": ("Farbe: weiß", "Farbe: rot und weiß"),
}


def edit_notes_mid_work(p: Person, w: Wording) -> None:
    """The agent reads the person's notes, orders a picture for them, and writes the notes
    back with a line for the picture; while the picture is being made the person changes a
    line. The agent's write on the version it read is stale: the platform refuses it, and
    the agent writes again on the person's version, which keeps the person's line."""
    lang = p.lang
    doc = p.create_document("notes", NOTES[lang])
    p.simulator(latency_scale=30)  # a slow vendor: the person edits while it works
    try:
        p.say(w["NOTES_ASK"][lang].format(doc=doc), "notes", "lightweight")
        # The agent read the notes and ordered the picture, which is being made.
        p.until("notes", lambda t: t["status"] == "waiting_generation")
        p.edit_document(doc, 1, *RECOLOUR[lang])
    finally:
        p.simulator()
    p.until("notes", lambda t: completed(t) and _written_by_task(p, doc))
    text = str(p.get(f"/v1/objects/{doc}")["content"]["text"])
    if RECOLOUR[lang][1] not in text or "Picture: obj_" not in text:
        raise ScenarioFailure(f"the notes lost the person's change or the picture: {text!r}")
    refused = [
        c
        for c in p.get(f"/v1/tasks/{p.journal.works['notes']}/context").get("layers", [])
        if "at version 2, not 1" in c["text"]
    ]
    if not refused:
        raise ScenarioFailure("the agent's write on the old version was never refused")


def _written_by_task(p: Person, doc: str) -> bool:
    versions = p.get_all(f"/v1/objects/{doc}/versions", "versions")
    return any(str(v["created_by"]).startswith("task:") for v in versions)


WORDS: Wording = {
    "CAT": CAT, "POSTERS": POSTERS, "CAT_VIDEO": CAT_VIDEO, "WARMER": WARMER, "CUP": CUP,
    "CUP_TALLER": CUP_TALLER, "CAT_DARKER": CAT_DARKER, "CUP_RESUME": CUP_RESUME,
    "BRAND": BRAND, "BLUE": BLUE, "GREEN_FACT": GREEN_FACT, "GREEN": GREEN, "MASCOT": MASCOT,
    "BICYCLE": BICYCLE, "FORGET": FORGET, "TEAPOT": TEAPOT, "FILM": FILM,
    "NOTES_ASK": NOTES_ASK,
}  # fmt: skip
# The same stories in other words (same meaning, same expected work and routing): the
# platform must understand people however they put it, not the harness's own sentences.
PARAPHRASED: Wording = {
    **WORDS,
    "CAT": _t("Draw me a ginger tabby cat", "Zeichne mir eine rot getigerte Katze"),
    "POSTERS": _t(
        "I'd like a set of retro posters for our brand",
        "Ich hätte gern ein paar Plakate im Retro-Look für unsere Marke",
    ),
    "CAT_VIDEO": _t(
        "Make a five-second clip out of yesterday's cat picture",
        "Mach aus dem Katzenbild von gestern einen Clip, fünf Sekunden lang",
    ),
    "WARMER": _t(
        "Give last time's posters a slightly warmer tone",
        "Gib den Plakaten vom letzten Mal einen etwas wärmeren Ton",
    ),
    "CUP": _t(
        "Model a ceramic coffee cup with a wooden handle in 3D",
        "Modelliere in 3D eine Kaffeetasse aus Keramik mit einem Holzgriff",
    ),
    "CUP_TALLER": _t("Could you make the cup taller", "Die Tasse bitte ein Stück höher machen"),
    "CAT_DARKER": _t("Could you darken the cat a little", "Die Katze bitte ein wenig dunkler"),
    "CUP_RESUME": _t(
        "The ceramic coffee cup from last week again: a thinner handle, please",
        "Nochmal die Kaffeetasse aus Keramik von letzter Woche: bitte einen dünneren Griff",
    ),
    "BRAND": _t("My company's main colour is blue.", "Die Hauptfarbe unserer Firma ist blau."),
    "GREEN_FACT": _t("Our brand's main colour is green.", "Unsere Marke hat die Hauptfarbe grün."),
    "MASCOT": _t("Draw our brand mascot", "Zeichne unser Maskottchen"),
    "BICYCLE": _t("Make a picture of a bicycle", "Mach ein Bild von einem Fahrrad"),
    "FORGET": _t(
        "Please forget that the main colour of the brand is green",
        "Vergiss, dass grün die Hauptfarbe der Marke ist",
    ),
    "TEAPOT": _t("Draw a teapot", "Zeichne eine Teekanne"),
    "FILM": _t(
        "Turn my storyboard {flow} into a short film",
        "Mach aus meinem Storyboard {flow} einen Kurzfilm",
    ),
    "NOTES_ASK": _t(
        "Make a picture of a lighthouse and put it into my notes {doc}",
        "Mach ein Bild von einem Leuchtturm und nimm es in meine Notizen {doc} auf",
    ),
}


@dataclass(frozen=True)
class Story:
    name: str
    run: Callable[[Person, Wording], None]
    short: bool = False  # part of the subset `make test` runs
    words: Wording = field(default_factory=lambda: WORDS)


_BASE = (
    Story("posters", posters),
    Story("3d-object", object_3d, short=True),
    Story("three-tasks", three_tasks),
    Story("resume-last-week", resume_by_description),
    Story("correct-forget", correct_then_forget, short=True),
    Story("short-film", short_film),
    Story("edit-flow-mid-run", edit_flow_mid_run),
    Story("edit-notes-mid-work", edit_notes_mid_work),
    Story("paid-again", paid_again),
)
# Each story once more in paraphrase ("posters~2"), run by the harness like the others.
STORIES = _BASE + tuple(Story(f"{s.name}~2", s.run, False, PARAPHRASED) for s in _BASE)

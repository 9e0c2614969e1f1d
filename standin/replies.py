"""The offline model's honest sentences, EN and DE: what it is making and that it will
appear, what it can do when it did not understand, and that a real model is used when
ANTHROPIC_API_KEY is set. Never "done" before the thing exists; never a raw id."""

from __future__ import annotations

_KIND = {
    "image": ("image", "Bild"),
    "video": ("video", "Video"),
    "audio": ("audio clip", "Audio"),
    "3d": ("3D model", "3D-Modell"),
}
_READY = {
    "image": ("Here is your image", "Hier ist dein Bild"),
    "video": ("Here is your video", "Hier ist dein Video"),
    "audio": ("Here is your audio clip", "Hier ist dein Audio"),
    "3d": ("Here is your 3D model", "Hier ist dein 3D-Modell"),
}
CAN_DO = (
    "I can make images, videos, audio and 3D models, plan multi-part work (a series, a "
    "campaign, a book, a film), change earlier work, answer questions about the models and "
    "prices, and remember or forget what you tell me.",
    "Ich kann Bilder, Videos, Audio und 3D-Modelle machen, mehrteilige Arbeiten planen (eine "
    "Serie, eine Kampagne, ein Buch, einen Film), frühere Arbeiten ändern, Fragen zu Modellen "
    "und Preisen beantworten und mir Dinge merken oder vergessen.",
)
OFFLINE = (
    "I am the offline model; with ANTHROPIC_API_KEY set, a real model reads your messages.",
    "Ich bin das Offline-Modell; mit gesetztem ANTHROPIC_API_KEY liest ein echtes Modell deine "
    "Nachrichten.",
)
_SAY = {
    "unsure": (
        f"I'm not sure what you'd like. {CAN_DO[0]} {OFFLINE[0]}",
        f"Ich bin nicht sicher, was du möchtest. {CAN_DO[1]} {OFFLINE[1]}",
    ),
    "nothing_yet": (
        f"We haven't made anything yet. {CAN_DO[0]}",
        f"Wir haben noch nichts gemacht. {CAN_DO[1]}",
    ),
    "remember": (
        "Noted. What I keep from it shows up in your memories.",
        "Notiert. Was ich mir davon merke, erscheint in deinen Erinnerungen.",
    ),
    "other": (
        "Happy to help. Tell me what to make: an image, a video, audio, a 3D model, or "
        "multi-part work such as a poster series, a campaign or a children's book.",
        "Gern. Sag mir, was ich machen soll: ein Bild, ein Video, Audio, ein 3D-Modell oder "
        "etwas Mehrteiliges wie eine Plakatserie, eine Kampagne oder ein Kinderbuch.",
    ),
    "move_which": (
        "Which task should your previous message go to? Name it, e.g. \u201cthat was for "
        "the posters\u201d.",
        "Zu welcher Aufgabe soll deine vorige Nachricht? Nenn sie, z. B. \u201edas war für "
        "die Poster\u201c.",
    ),
    "nothing_to_change": (
        "There is no earlier work here to change yet. Tell me what to make first: an image, "
        "a video, audio or a 3D model.",
        "Hier gibt es noch nichts, was ich ändern könnte. Sag mir zuerst, was ich machen "
        "soll: ein Bild, ein Video, Audio oder ein 3D-Modell.",
    ),
    "remaking": (
        "The {kind} “{name}” misses the brief ({off}); I'm making it once more.",
        "Das {kind} „{name}“ trifft die Vorgabe nicht ({off}); ich mache es noch einmal.",
    ),
    "still_off": (
        " Note: {off}.",
        " Hinweis: {off}.",
    ),
    "making": (
        "I'm making the {kind} “{name}”; it will appear here when it is ready.",
        "Ich mache das {kind} „{name}“; es erscheint hier, sobald es fertig ist.",
    ),
    "making_many": (
        "I'm making {n} pieces for “{name}”; they will appear here when they are ready.",
        "Ich mache {n} Stücke für „{name}“; sie erscheinen hier, sobald sie fertig sind.",
    ),
    "price": (
        "The {kind} “{name}” costs {price}; it starts once you confirm the price card.",
        "Das {kind} „{name}“ kostet {price}; es entsteht, sobald du die Preiskarte bestätigst.",
    ),
    "credit": (
        "The {kind} “{name}” costs {price}, more than the balance; it starts by itself "
        "once you add credit.",
        "Das {kind} „{name}“ kostet {price}, mehr als das Guthaben; es entsteht von selbst, "
        "sobald du Guthaben auflädst.",
    ),
    "still_making": (
        "The {kind} “{name}” is still being made; it will appear here when it is ready.",
        "Das {kind} „{name}“ entsteht noch; es erscheint hier, sobald es fertig ist.",
    ),
    "made": (
        "The {kind} “{name}” is here. Tell me what to change, or what to make next.",
        "Das {kind} „{name}“ ist da. Sag mir, was ich ändern oder als Nächstes machen soll.",
    ),
    "failed": ("The {kind} “{name}” could not be made: ", "Das {kind} „{name}“ ging nicht: "),
    "plan_elsewhere": (
        "“{name}” is multi-part work, and this task was started for a single piece. Ask for "
        "it as a new request and I plan it as a task of its own: one price for the plan, "
        "drafts, your pick, then the finals.",
        "„{name}“ ist mehrteilige Arbeit, und diese Aufgabe ist für ein einzelnes Stück "
        "angelegt. Bitte als neue Anfrage, dann plane ich sie als eigene Aufgabe: ein Preis "
        "für den Plan, Entwürfe, deine Wahl, dann die finalen Stücke.",
    ),
}


def say(key: str, lang: str, **kw: object) -> str:
    en, de = _SAY[key]
    return (de if lang == "de" else en).format(**kw)


def kind_word(kind: str, lang: str) -> str:
    en, de = _KIND.get(kind, _KIND["image"])
    return de if lang == "de" else en


def ready(kind: str, lang: str, name: str) -> str:
    """The reply once a piece exists, naming it (the app links the object itself)."""
    en, de = _READY.get(kind, _READY["image"])
    head = de if lang == "de" else en
    if not name:
        return f"{head}."
    return f"{head} für „{name}“." if lang == "de" else f"{head} for “{name}”."

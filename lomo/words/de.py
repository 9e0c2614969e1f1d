"""German sentences for people, by key (see lomo/words/__init__.py)."""

WORDS: dict[str, str] = {
    # Routing
    "route.lost": (
        "Ich konnte diese Nachricht keiner Aufgabe zuordnen. Bitte noch einmal sagen oder "
        "direkt in der Aufgabe schreiben."
    ),
}

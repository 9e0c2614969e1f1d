"""German sentences for people, by key (see lomo/words/__init__.py)."""

WORDS: dict[str, str] = {
    # Routing
    "route.lost": (
        "Ich konnte diese Nachricht keiner Aufgabe zuordnen. Bitte noch einmal sagen oder "
        "direkt in der Aufgabe schreiben."
    ),
    "route.okay": "Alles klar.",
    "route.nothing_to_move": "Da ist nichts zu verschieben.",
    "route.moved": "Verschoben nach „{goal}“.",
    # Cards
    "cards.clarify.which": "Welche Aufgabe meinst du?",
    "cards.clarify.archived": "Diese Aufgabe ist archiviert. Wieder aufnehmen?",
    "cards.clarify.stopped": "Diese Aufgabe ist gestoppt. Wieder aufnehmen?",
    "cards.clarify.new": "Etwas Neues",
    # Checklist
    "checklist.yes": "Ja",
    "checklist.no": "Nein",
}

"""German sentences for people, by key (see lomo/words/__init__.py)."""

WORDS: dict[str, str] = {
    # Routing
    "route.lost": (
        "Ich konnte diese Nachricht keiner Aufgabe zuordnen. Bitte noch einmal sagen oder "
        "direkt in der Aufgabe schreiben."
    ),
    # Task workflow
    "task.stopped_by_person": "von der Person gestoppt",
    "task.paused_by_person": "von der Person pausiert",
    "task.checklist_done": "jeder Schritt der Checkliste ist erledigt",
    "task.waiting_jobs": "wartet auf Generierungsaufträge",
    "task.waiting_answer": "wartet auf die Antwort der Person",
    "task.checkpoint": "Checkpoint {item} braucht die Person",
    "task.blocked": "blockiert: {reason}",
    "task.max_steps": "Grenze: max_steps_per_turn erreicht",
    "task.new_messages": "während des Durchgangs kamen neue Nachrichten",
    "task.asked": "der Agent hat die Person gefragt",
    "task.answered": "beantwortet",
    "task.answered_waiting": "beantwortet; wartet auf die Person",
    "task.progress": "Fortschritt gemacht, weitere Schritte offen",
    "task.no_progress": "Grenze: kein echter Fortschritt in {turns} Durchgängen",
    "task.trying_again": "noch kein Fortschritt; neuer Versuch",
    "task.waiting_credit": "wartet auf Guthaben: ein bezahlter Aufruf braucht mehr Guthaben",
    "task.closed_messages": "Aufgabe ist {status} und nimmt keine Nachrichten an",
    "task.closed_cards": "Aufgabe ist {status} und nimmt keine Kartenantworten an",
    "task.closed_pause": "Aufgabe ist {status} und lässt sich nicht pausieren",
    "task.already_closed": "Aufgabe ist bereits {status}",
    "task.stopping_no_resume": "Aufgabe wird gestoppt und kann nicht fortgesetzt werden",
    "task.not_paused": "Aufgabe ist {status}, nicht pausiert",
    "task.limits_range": "Grenzen müssen zwischen 1 und 1000 liegen",
    "task.card_not_open": "Karte {card_id} ist in dieser Aufgabe nicht offen",
    "task.message_required": "message_id fehlt",
}

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
    # Answers on confirm cards (the checklist, checkpoints)
    "answer.yes": "Ja",
    "answer.no": "Nein",
    # Presentation
    "present.image": "Hier ist dein Bild „{name}“.",
    "present.video": "Hier ist dein Video „{name}“.",
    "present.audio": "Hier ist dein Audioclip „{name}“.",
    "present.3d": "Hier ist dein 3D-Modell „{name}“.",
    "present.many": "Hier sind deine Ergebnisse für „{name}“.",
    # Abgebrochene Aufträge (docs/architecture.md#cancelling-a-job)
    "cancel.noun.image": "Bild",
    "cancel.noun.video": "Video",
    "cancel.noun.audio": "Audioclip",
    "cancel.noun.3d": "3D-Modell",
    "cancel.cause.moved": (
        "Die Nachricht, für die das gemacht wurde, wurde in eine andere Aufgabe verschoben."
    ),
    "cancel.cause.changed": "Du hast den Auftrag geändert, während er lief.",
    "cancel.free": "Abgebrochen: {noun} „{name}“, bevor es begonnen hatte; nichts wurde berechnet.",
    "cancel.partial": "Abgebrochen: {noun} „{name}“ bei {percent} %; {amount} EUR für den "
    "schon gemachten Teil berechnet.",
    "cancel.finished": "{noun} „{name}“ war schon fertig, bevor es abgebrochen werden "
    "konnte: {amount} EUR berechnet, es bleibt bei den Ergebnissen dieser Aufgabe.",
    # Runtime
    "runtime.checkpoint": "Bitte bestätigen: {item}",
    # Flows
    "flow.price": "Flow-Lauf: {nodes} kostenpflichtige Knoten, insgesamt {amount} EUR",
    "flow.remake": (
        "{count} von {total} kostenpflichtigen Knoten neu machen, insgesamt {amount} EUR; "
        "{kept} bleiben, wie sie sind."
    ),
    "flow.why.new.one": "{nodes} ist neu.",
    "flow.why.new.many": "{nodes} sind neu.",
    "flow.why.edited.one": "{nodes} wurde geändert.",
    "flow.why.edited.many": "{nodes} wurden geändert.",
    "flow.why.part.one": "{nodes} zeigt {name}; geändert hat sich: {detail}.",
    "flow.why.part.many": "{nodes} zeigen {name}; geändert hat sich: {detail}.",
    "flow.why.document.one": "{nodes} nutzt das ganze Dokument {name}, das sich geändert hat.",
    "flow.why.document.many": ("{nodes} nutzen das ganze Dokument {name}, das sich geändert hat."),
    "flow.why.input.one": "{nodes} baut auf neu Gemachtem auf: {detail}.",
    "flow.why.input.many": "{nodes} bauen auf neu Gemachtem auf: {detail}.",
    "flow.why.stale.one": "{nodes} ist veraltet.",
    "flow.why.stale.many": "{nodes} sind veraltet.",
    "flow.why.entry": "Eintrag",
    "flow.and": "und",
    # Money
    "money.price": "{kind} mit {model}: {amount} EUR",
    "money.credit": (
        "Guthaben aufladen: {kind} mit {model} kostet {amount} EUR, {balance} EUR sind noch übrig"
    ),
    "money.budget": "Budget für diesen Plan: {amount} EUR — {purpose}",
    # Memory
    "memory.forget": (
        "{what} vergessen, samt allem, was daraus abgeleitet wurde? Das lässt sich nicht "
        "rückgängig machen."
    ),
    "memory.forget.text": "„{text}“",
    "memory.forget.memory": "Erinnerung {memory_id}",
    "memory.forget.yes": "Vergessen",
    "memory.forget.no": "Behalten",
    # Workspace
    "workspace.delete": (
        "{type} „{name}“ mit allen {versions} Version(en) löschen? Das lässt sich nicht "
        "rückgängig machen."
    ),
    "workspace.delete.yes": "Endgültig löschen",
    "workspace.delete.no": "Behalten",
    # Journal
    "journal.moved": (
        "[Hinweis, nicht von der Person] Die Nachricht „{said}“ gehört zur Aufgabe „{goal}“ "
        "und wurde dorthin verschoben. Hier nicht weiter darauf eingehen."
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
    "generation.deadline": (
        "Der Auftrag für „{name}“ ist nicht innerhalb von {minutes} Minuten fertig "
        "geworden, deshalb warte ich nicht länger darauf. Die {amount} € sind wieder in "
        "deinem Guthaben."
    ),
    "generation.deadline_reason": (
        "der Anbieter hat den Auftrag nicht innerhalb von {minutes} Minuten fertiggestellt"
    ),
    "generation.deadline_free": (
        "Der Auftrag für „{name}“ ist nicht innerhalb von {minutes} Minuten fertig "
        "geworden, deshalb warte ich nicht länger darauf."
    ),
    # Erinnerungen (docs/architecture.md#nudges)
    "nudge.card": "Eine Frage hier wartet noch auf deine Antwort.",
    "nudge.finished": "Die Arbeit hier ist fertig und wartet darauf, dass du sie ansiehst.",
    "nudge.again": "Ich warte {wait}, bevor ich dich wieder erinnere.",
    "nudge.last": "Daran erinnere ich dich nicht noch einmal.",
    "nudge.batch.one": "Eine Aufgabe wartet auf dich: {goals}.",
    "nudge.batch.many": "{count} Aufgaben warten auf dich: {goals}.",
    "duration.second.one": "{n} Sekunde",
    "duration.second.many": "{n} Sekunden",
    "duration.minute.one": "{n} Minute",
    "duration.minute.many": "{n} Minuten",
    "duration.hour.one": "{n} Stunde",
    "duration.hour.many": "{n} Stunden",
    "duration.day.one": "{n} Tag",
    "duration.day.many": "{n} Tage",
}

"""English sentences for people, by key (see lomo/words/__init__.py)."""

WORDS: dict[str, str] = {
    # Routing
    "route.lost": (
        "I could not tell where this message belongs. Please say it again, or write in the "
        "task itself."
    ),
    "route.okay": "Okay.",
    "route.nothing_to_move": "There is nothing to move.",
    "route.moved": 'Moved to "{goal}".',
    # Cards
    "cards.clarify.which": "Which task do you mean?",
    "cards.clarify.archived": "That task is archived. Reopen it?",
    "cards.clarify.stopped": "That task is stopped. Reopen it?",
    "cards.clarify.new": "Something new",
    # Checklist
    "checklist.yes": "Yes",
    "checklist.no": "No",
}

"""English sentences for people, by key (see lomo/words/__init__.py)."""

WORDS: dict[str, str] = {
    # Routing
    "route.lost": (
        "I could not tell where this message belongs. Please say it again, or write in the "
        "task itself."
    ),
}

"""The `clarify` card: the router could not tell which task a message meant, so it asked.

The card has no task; its answer goes back to the person's main thread, which routes the
original message to the chosen task (or starts something new) without another model call.
The hand-off itself starts a workflow, so it lives with the api (`api/card_effects.py`).
"""

from __future__ import annotations

NEW_OPTION = "new"  # the option id for "none of these: start something new"

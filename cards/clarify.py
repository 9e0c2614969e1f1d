"""The `clarify` card: the router could not tell which task a message meant, so it asked.

The card has no task; its answer goes back to the person's main thread, which routes the
original message to the chosen task (or starts something new) without another model call.
The hand-off itself starts a workflow, so it lives with the api (`api/services/card_effects.py`).
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from cards.store import create_card
from lomo.db.models import Card, MessageRow, Task
from lomo.states import CLOSED_TASK, CardKind
from lomo.words import say

NEW_OPTION = "new"  # the option id for "none of these: start something new"


def clip(text: str, limit: int) -> str:
    """One line of at most `limit` characters, for a label."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clarify_title(reason: str, language: str) -> str:
    """A closed task's status asks to reopen it; any other reason asks which task."""
    if reason in CLOSED_TASK:
        return say(f"cards.clarify.{reason}", language)
    return say("cards.clarify.which", language)


async def clarify_card(
    s: AsyncSession, msg: MessageRow, tasks: list[Task], reason: str, language: str
) -> Card:
    """The card asking which of `tasks` the message meant (one per message)."""
    options = [{"id": t.id, "label": clip(t.goal, 80) or t.id} for t in tasks]
    options.append({"id": NEW_OPTION, "label": say("cards.clarify.new", language)})
    return await create_card(
        s,
        user_id=msg.user_id,
        kind=CardKind.CLARIFY,
        title=clarify_title(reason, language),
        options=options,
        payload={"message_id": msg.id, "reason": reason, "text": clip(msg.text, 200)},
        key=f"clarify:{msg.id}",
    )

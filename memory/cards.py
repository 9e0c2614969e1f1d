"""The `forget` card: forgetting is irreversible, so it needs a confirmation every time
(docs/architecture.md#memory); on confirm the person's MemoryWorkflow runs the cascade (the
effect that starts it is the api's, `api/card_effects.py`)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from cards.store import create_card
from lomo.db.models import Card
from lomo.errors import InvalidInput, NotFound
from lomo.language import task_language
from lomo.states import CardAction, CardKind
from lomo.words import say
from memory.models import Memory


async def request_forget_card(
    s: AsyncSession,
    user_id: str,
    memory_id: str | None,
    text: str | None,
    task_id: str | None = None,
    key: str | None = None,
) -> Card:
    """Open a forget card; nothing is forgotten until the person confirms it."""
    text = (text or "").strip() or None
    if not memory_id and not text:
        raise InvalidInput("name a memory_id or a text to forget")
    lang = await task_language(s, task_id)
    what = say("memory.forget.text", lang, text=text) if text else ""
    if memory_id:
        memory = await s.get(Memory, memory_id)
        if memory is None or memory.user_id != user_id:
            raise NotFound(f"no memory {memory_id}")
        what = what or say("memory.forget.memory", lang, memory_id=memory_id)
    return await create_card(
        s,
        user_id=user_id,
        kind=CardKind.FORGET,
        title=say("memory.forget", lang, what=what),
        options=[
            {"id": CardAction.CONFIRM, "label": say("memory.forget.yes", lang)},
            {"id": CardAction.REJECT, "label": say("memory.forget.no", lang)},
        ],
        task_id=task_id,
        payload={"memory_id": memory_id, "text": text},
        key=key,
    )

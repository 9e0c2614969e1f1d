"""Deletion of workspace objects: only through a `delete` card the person confirms, a new
card every time: an irreversible operation needs a confirmation each time."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from cards.effects import CardEffect
from cards.store import confirmed, create_card
from lomo.db.models import Card
from lomo.language import task_language
from lomo.states import CardAction, CardKind
from lomo.words import say
from workspace.store import get_live, mark_deleted, purge_blobs

log = logging.getLogger(__name__)


async def request_delete(
    s: AsyncSession,
    user_id: str,
    object_id: str,
    task_id: str | None = None,
    key: str | None = None,
) -> Card:
    """Open a `delete` card for the object; nothing is deleted until it is confirmed.
    `key` (a tool call's call_id) makes a retried request return the same card."""
    obj = await get_live(s, user_id, object_id)
    lang = await task_language(s, task_id)
    title = say("workspace.delete", lang, type=obj.type, name=obj.name, versions=obj.version)
    return await create_card(
        s,
        user_id=user_id,
        kind=CardKind.DELETE,
        title=title,
        options=[
            {"id": CardAction.CONFIRM, "label": say("workspace.delete.yes", lang)},
            {"id": CardAction.REJECT, "label": say("workspace.delete.no", lang)},
        ],
        task_id=task_id,
        payload={"object_id": obj.id, "name": obj.name, "type": obj.type},
        key=key,
    )


async def _delete_in_transaction(s: AsyncSession, card: Card) -> None:
    if confirmed(card):
        await mark_deleted(s, card.user_id, str(card.payload["object_id"]))


async def _purge_after_commit(state: Any, card: Card) -> None:
    """Bytes go once the deletion is durable; a failure leaves files only, never a live
    object, so it is logged and the next confirmed card or an operator can purge again."""
    if not confirmed(card):
        return
    try:
        async with state.db.session() as s:
            await purge_blobs(s, state.assets, str(card.payload["object_id"]))
    except Exception:
        log.exception("purging the bytes of %s failed", card.payload.get("object_id"))


DELETE_EFFECT = CardEffect(in_transaction=_delete_in_transaction, after_commit=_purge_after_commit)

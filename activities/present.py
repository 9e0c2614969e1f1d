"""The runtime's own reply when a finished result is the answer (docs/architecture.md#waking-
the-model): the result named, in the task's language, with no model call. The workflow
decides that it presents; `set_task_status` writes the reply with the status it goes with."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select

from lomo.db.engine import Database
from lomo.db.models import GenerationOrder, Task
from lomo.states import OrderStatus
from lomo.words import euros, say
from money.catalogue import cancel_charge

# What a single result is called; several are results of the task.
_KINDS = frozenset({"image", "video", "audio", "3d"})
_IDS = re.compile(r"\b[a-z]{3}_[0-9a-z]{20,}\b")
_NAME_CHARS = 60


def result_text(kinds: list[str], goal: str, language: str) -> str:
    """'Here is your image “a fox in the snow”.': what was made, named by the task's goal
    (never by object ids: the app links the assets, `object_ids` in the event), in the
    person's language (English unless the task is German)."""
    one = len(kinds) == 1 and kinds[0] in _KINDS
    return say(f"present.{kinds[0]}" if one else "present.many", language, name=work_name(goal))


def work_name(goal: str) -> str:
    words = " ".join(_IDS.sub("", goal).split()).strip(" .!?")
    if len(words) <= _NAME_CHARS:
        return words
    return words[:_NAME_CHARS].rsplit(" ", 1)[0] + " …"


async def result_reply(db: Database, task_id: str, order_ids: list[str]) -> dict[str, Any]:
    """The `task.reply` event's data presenting these orders' assets. Raises LookupError
    when an order of the task has no asset (the workflow presents only collected ones)."""
    async with db.session() as s:
        head = (
            await s.execute(select(Task.language, Task.turn, Task.goal).where(Task.id == task_id))
        ).first()
        rows = (
            await s.execute(
                select(GenerationOrder.id, GenerationOrder.kind, GenerationOrder.object_id)
                .where(GenerationOrder.id.in_(order_ids), GenerationOrder.task_id == task_id)
                .order_by(GenerationOrder.created_at, GenerationOrder.id)
            )
        ).all()
    if head is None or len(rows) != len(set(order_ids)) or any(r[2] is None for r in rows):
        raise LookupError(f"task {task_id}: no asset to present for {order_ids}")
    kinds = [str(r[1]) for r in rows]
    objects = [str(r[2]) for r in rows]
    return {
        "task_id": task_id,
        "text": result_text(kinds, str(head.goal), str(head.language)),
        # The turn it ends; step 0: the runtime's reply, not a model step's.
        "turn": int(head.turn),
        "step": 0,
        "object_ids": objects,
        "by": "runtime",
    }


async def cancel_reply(
    db: Database, task_id: str, order_ids: list[str], cause: str = ""
) -> dict[str, Any] | None:
    """The `task.reply` event's data telling the person what a stop cancelled: each job
    by what it was to make, and what it cost (nothing before it started, the partial
    price after; a job that had finished first is charged and kept). None: nothing to say."""
    async with db.session() as s:
        head = (await s.execute(select(Task.language, Task.turn).where(Task.id == task_id))).first()
        rows = (
            await s.scalars(
                select(GenerationOrder)
                .where(GenerationOrder.id.in_(order_ids), GenerationOrder.task_id == task_id)
                .order_by(GenerationOrder.created_at, GenerationOrder.id)
            )
        ).all()
    if head is None:
        return None
    lang = str(head.language)
    lines = [_cancel_line(o, lang) for o in rows]
    text = " ".join(line for line in lines if line)
    if not text:
        return None
    if cause:
        # Not a stop: the person should read first why their job was stopped.
        text = f"{say(f'cancel.cause.{cause}', lang)} {text}"
    return {"task_id": task_id, "text": text, "turn": int(head.turn), "step": 0, "by": "runtime"}


def _cancel_line(o: GenerationOrder, lang: str) -> str:
    noun = say(f"cancel.noun.{o.kind}", lang) if o.kind in _KINDS else o.kind
    name = work_name(str(o.params.get("prompt") or ""))
    if o.status == OrderStatus.SUCCEEDED:
        return say("cancel.finished", lang, noun=noun, name=name, amount=euros(o.price_cents, lang))
    if o.status != OrderStatus.CANCELLED:
        return ""  # failed on its own: the stop changed nothing about it
    charge = cancel_charge(o.price_cents, o.progress)
    if charge == 0:
        return say("cancel.free", lang, noun=noun, name=name)
    percent = round(o.progress * 100)
    return say(
        "cancel.partial", lang, noun=noun, name=name, percent=percent, amount=euros(charge, lang)
    )

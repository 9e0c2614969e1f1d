"""The runtime's own reply when a finished result is the answer (docs/architecture.md#waking-
the-model): the result named, in the task's language, with no model call. The workflow
decides that it presents; `set_task_status` writes the reply with the status it goes with."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select

from lomo.db.engine import Database
from lomo.db.models import GenerationOrder, Task

_ONE = {
    "image": ("Here is your image “{}”.", "Hier ist dein Bild „{}“."),
    "video": ("Here is your video “{}”.", "Hier ist dein Video „{}“."),
    "audio": ("Here is your audio clip “{}”.", "Hier ist dein Audioclip „{}“."),
    "3d": ("Here is your 3D model “{}”.", "Hier ist dein 3D-Modell „{}“."),
}
_MANY = ("Here are your results for “{}”.", "Hier sind deine Ergebnisse für „{}“.")
_IDS = re.compile(r"\b[a-z]{3}_[0-9a-z]{20,}\b")
_NAME_CHARS = 60


def result_text(kinds: list[str], goal: str, language: str) -> str:
    """'Here is your image “a fox in the snow”.': what was made, named by the task's goal
    (never by object ids: the app links the assets, `object_ids` in the event), in the
    person's language (English unless the task is German)."""
    de = 1 if language == "de" else 0
    head = _ONE.get(kinds[0], _MANY)[de] if len(kinds) == 1 else _MANY[de]
    return head.format(work_name(goal))


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

"""The runtime's own reply when a finished result is the answer (docs/architecture.md#waking-
the-model): the result named, in the task's language, with no model call. The workflow
decides that it presents; `set_task_status` writes the reply with the status it goes with."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from lomo.db.engine import Database
from lomo.db.models import GenerationOrder, Task

_ONE = {
    "image": ("Here is your image.", "Hier ist dein Bild."),
    "video": ("Here is your video.", "Hier ist dein Video."),
    "audio": ("Here is your audio clip.", "Hier ist dein Audioclip."),
    "3d": ("Here is your 3D model.", "Hier ist dein 3D-Modell."),
}
_MANY = ("Here are your results.", "Hier sind deine Ergebnisse.")


def result_text(kinds: list[str], object_ids: list[str], language: str) -> str:
    """'Here is your image. (obj_…)': what was made, and which assets, in the person's
    language (English unless the task is German)."""
    de = 1 if language == "de" else 0
    head = _ONE.get(kinds[0], _MANY)[de] if len(kinds) == 1 else _MANY[de]
    return f"{head} ({', '.join(object_ids)})"


async def result_reply(db: Database, task_id: str, order_ids: list[str]) -> dict[str, Any]:
    """The `task.reply` event's data presenting these orders' assets. Raises LookupError
    when an order of the task has no asset (the workflow presents only collected ones)."""
    async with db.session() as s:
        head = (await s.execute(select(Task.language, Task.turn).where(Task.id == task_id))).first()
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
        "text": result_text(kinds, objects, str(head.language)),
        # The turn it ends; step 0: the runtime's reply, not a model step's.
        "turn": int(head.turn),
        "step": 0,
        "object_ids": objects,
        "by": "runtime",
    }

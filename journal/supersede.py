"""Which of a task's running jobs a new message makes unwanted (docs/architecture.md,
"Cancelling on a move or a change").

Two kinds of message arrive while a task waits on its jobs and take the request away
from them:

- the notice that a message the task had read was moved to another task: the jobs the
  turn that read it placed (their idempotency key `{task}:{turn}:…` names that turn);
- the person's own change of the request ("make the cat darker"): every job still
  running, made for the request as it was.

Whether a message changes the request is a judgement passed in (`changes`), so this room
needs no model. A change is taken (marked read, `journal/marks.py`) before it cancels
anything: of a withdrawal and the cancel it sets off, exactly one happens.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sqlalchemy import select

from journal.marks import take_messages
from journal.moves import is_notice
from lomo.db.engine import Database
from lomo.db.models import GenerationOrder, MessageRow
from lomo.states import TERMINAL_ORDER

MOVED = "moved"
CHANGED = "changed"


@dataclass
class Superseded:
    order_ids: list[str] = field(default_factory=list)
    cause: str = ""  # MOVED or CHANGED ("" when nothing is superseded)


def turn_of(idempotency_key: str, task_id: str) -> int | None:
    """The turn a call id `{task}:{turn}:{step}:{index}` was planned in (None: another
    task's key, or a flow node's)."""
    head, _, rest = idempotency_key.partition(f"{task_id}:")
    if head or not rest:
        return None
    turn = rest.split(":", 1)[0]
    return int(turn) if turn.isdigit() else None


async def superseded_orders(
    db: Database,
    user_id: str,
    task_id: str,
    message_ids: list[str],
    changes: Callable[[str], Awaitable[bool]],
) -> Superseded:
    """The task's running orders that `message_ids` take the request away from."""
    async with db.session() as s:
        rows = list(
            await s.scalars(
                select(MessageRow).where(
                    MessageRow.id.in_(message_ids),
                    MessageRow.user_id == user_id,
                    MessageRow.task_id == task_id,
                )
            )
        )
        running = list(
            await s.scalars(
                select(GenerationOrder).where(
                    GenerationOrder.task_id == task_id,
                    GenerationOrder.status.not_in(TERMINAL_ORDER),
                )
            )
        )
        moved_ids = [str(m.target["message_id"]) for m in rows if _moved_notice(m)]
        turns = set(
            await s.scalars(
                select(MessageRow.processed_turn).where(
                    MessageRow.id.in_(moved_ids), MessageRow.processed_turn.is_not(None)
                )
            )
        )
    if turns:
        ids = [o.id for o in running if turn_of(o.idempotency_key, task_id) in turns]
        if ids:
            return Superseded(sorted(ids), MOVED)
    said = [m for m in rows if _persons_open(m) and await changes(m.text)]
    if not said or not running:
        return Superseded()
    # Taken before anything is cancelled: a withdrawal that came first wins.
    taken = await take_messages(db, user_id, task_id, [m.id for m in said])
    if not taken:
        return Superseded()
    return Superseded(sorted(o.id for o in running), CHANGED)


def _moved_notice(m: MessageRow) -> bool:
    target = m.target or {}
    return target.get("notice") == MOVED and bool(target.get("message_id"))


def _persons_open(m: MessageRow) -> bool:
    return not is_notice(m) and m.withdrawn_at is None and m.moved_to is None

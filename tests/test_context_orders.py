"""The dynamic tail never loses a job: an order whose job succeeded but whose asset the
task has not collected yet is still one the task waits on. (The scenario harness saw the
poster task order its three finals twice: the next step's context showed them neither as
running nor as succeeded, so the model ordered them again.)"""

from __future__ import annotations

from context.build import ContextExtras
from context.tail import dynamic_tail
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.models import GenerationOrder, Task


async def test_a_succeeded_order_not_yet_collected_is_still_waited_on(db: Database) -> None:
    async with db.session() as s:
        user, _ = await create_user(s, "p")
        task = Task(id="tsk_ctxorders", user_id=user.id, kind="persistent", goal="posters")
        s.add(task)
        await s.flush()
        for oid, status, obj in (
            ("ord_running", "running", None),
            ("ord_landed", "succeeded", None),  # callback recorded, asset not stored yet
            ("ord_done", "succeeded", "obj_stored"),
        ):
            s.add(
                GenerationOrder(
                    id=oid,
                    workspace_id=user.id,
                    task_id=task.id,
                    idempotency_key=f"{task.id}:1:1:{oid}",
                    kind="image",
                    model="sim-image-1",
                    params={"prompt": oid},
                    status=status,
                    object_id=obj,
                )
            )
        await s.flush()
        text, _ = await dynamic_tail(s, task, None, set(), ContextExtras())
    assert "waiting on order ord_running (running)" in text
    assert "waiting on order ord_landed (succeeded)" in text
    assert "generation succeeded: order ord_done → asset obj_stored" in text
    assert "ord_done (succeeded)" not in text

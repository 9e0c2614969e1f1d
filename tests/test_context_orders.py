"""The dynamic tail never loses a job: an order whose job succeeded but whose asset the
task has not collected yet is still one the task waits on (else the model would order it
again). A pure function of the loaded rows: no database."""

from __future__ import annotations

from context.tail import dynamic_tail
from context.types import OrderRow, Recalled, StepData, TaskHead


def test_a_succeeded_order_not_yet_collected_is_still_waited_on() -> None:
    task = TaskHead("tsk_o", "usr_o", "persistent", "en", "posters", "", 1)
    orders = [
        OrderRow(oid, f"tsk_o:1:1:{oid}", status, obj, None)
        for oid, status, obj in (
            ("ord_running", "running", None),
            ("ord_landed", "succeeded", None),  # callback recorded, asset not stored yet
            ("ord_done", "succeeded", "obj_stored"),
        )
    ]
    data = StepData(task, [], [], {}, None, {}, [], orders=orders)
    text, shown = dynamic_tail(data, None, set(), Recalled())
    assert "waiting on order ord_running (running)" in text
    assert "waiting on order ord_landed (succeeded)" in text
    assert "generation succeeded: order ord_done → asset obj_stored" in text
    assert "ord_done (succeeded)" not in text
    assert shown == ["ord_done"]

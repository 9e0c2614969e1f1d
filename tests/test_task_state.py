"""The task workflow's state as pure functions: restore, carry, the predicates, the view."""

from __future__ import annotations

import dataclasses

from lomo.contracts.task import InboxEntry, TaskInput
from lomo.states import TaskKind, TaskStatus
from workflows import task_state as ts

AT = "2026-01-01T00:00:00+00:00"


def _input(**changes: object) -> TaskInput:
    base = TaskInput(task_id="t1", user_id="u1", kind="lightweight", max_steps_per_turn=3)
    return dataclasses.replace(base, **changes)


def test_a_new_task_holds_its_first_message() -> None:
    s = ts.restore(_input(first_message_id="m1"), AT)
    assert s.inbox == [InboxEntry("m1", AT)]
    assert (s.kind, s.status) == (TaskKind.LIGHTWEIGHT, TaskStatus.RUNNING)
    assert ts.has_work(s) and not ts.must_end(s)


def test_carry_keeps_ids_limits_and_state_and_restores_to_the_same() -> None:
    s = ts.restore(_input(first_message_id="m1"), AT)
    s.kind, s.turn, s.idle_turns = TaskKind.PERSISTENT, 4, 1
    s.consume(["m1"])
    s.enqueue("m2", AT)
    s.waiting = {"o1": "succeeded", "o2": "running"}
    s.collected = {"o1"}
    s.present_orders = {"o1", "o2"}
    s.open_cards = {"c1": "t1:1:1:0", "c2": ""}
    s.answered = {"c1", "gone"}
    carried = ts.carry(s)
    assert carried.first_message_id is None
    assert (carried.task_id, carried.user_id, carried.max_steps_per_turn) == ("t1", "u1", 3)
    assert carried.kind == "persistent" and carried.turn == 4 and carried.idle_turns == 1
    assert carried.consumed_messages == ["m1"]
    assert [e.message_id for e in carried.inbox] == ["m2"]
    assert carried.waiting_orders == ["o2"] and carried.present_orders == ["o2"]
    assert carried.answered_cards == ["c1"]
    again = ts.restore(carried, AT)
    assert ts.view(again) == ts.view(s)


def test_a_message_read_or_held_is_not_taken_twice() -> None:
    s = ts.restore(_input(first_message_id="m1"), AT)
    s.enqueue("m1", AT)
    assert len(s.inbox) == 1
    s.consume(["m1"])
    s.enqueue("m1", AT)
    assert s.inbox == [] and s.consumed == ["m1"]


def test_the_consumed_ids_are_bounded() -> None:
    s = ts.restore(_input(), AT)
    s.consume([f"m{i}" for i in range(ts.CONSUMED_KEPT + 10)])
    assert len(s.consumed) == ts.CONSUMED_KEPT and s.consumed[-1] == f"m{ts.CONSUMED_KEPT + 9}"


def test_closed_reasons() -> None:
    s = ts.restore(_input(), AT)
    assert ts.closed_reason(s) == ""
    s.stop_requested = True
    assert ts.closed_reason(s) == "stopping"
    s = ts.restore(_input(status="completed"), AT)
    assert ts.closed_reason(s) == "completed"
    s = ts.restore(_input(status="completed", kind="persistent"), AT)
    assert ts.closed_reason(s) == ""  # a completed persistent task reopens on a message
    assert ts.closed_reason(ts.restore(_input(status="archived"), AT)) == "archived"


def test_parked_on_cards_until_an_answer_or_other_work() -> None:
    s = ts.restore(_input(open_cards={"c1": ""}), AT)
    assert ts.parked_on_cards(s) and not ts.has_work(s)
    s.answered.add("c1")
    assert ts.has_work(s) and not ts.parked_on_cards(s)


def test_waiting_for_credit_is_said() -> None:
    s = ts.restore(_input(open_cards={"c1": "t1:1:1:0"}), AT)
    assert ts.waiting_reason(s) == ""
    s.credit_cards.add("c1")
    assert ts.waiting_reason(s).startswith("waiting for credit")

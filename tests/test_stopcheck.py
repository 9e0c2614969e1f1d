"""The stop-check as a pure function: each outcome and its precedence."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from activities.types import TurnState
from workflows.stopcheck import TurnFacts, TurnSnapshot, Verdict, end_facts, stop_check

PLAN = TurnFacts(kind="persistent", checklist_total=4, checklist_open=2)


@pytest.mark.parametrize(
    ("facts", "action"),
    [
        (replace(PLAN, stop_requested=True, open_orders=3), "stop"),
        (replace(PLAN, paused=True, open_orders=1), "pause"),
        (replace(PLAN, checklist_open=0), "complete"),
        (replace(PLAN, checklist_open=0, open_orders=1), "wait_jobs"),  # done only when landed
        (replace(PLAN, open_orders=2, progress=False, idle_turns=9), "wait_jobs"),  # parked
        (replace(PLAN, open_cards=1, idle_turns=9), "wait_cards"),
        (replace(PLAN, checkpoint_due="chk_1"), "checkpoint"),
        (replace(PLAN, blocked="needs a logo file"), "stop"),
        (replace(PLAN, steps_exhausted=True, progress=True), "stop"),
        (replace(PLAN, inbox=1), "next_turn"),
        (replace(PLAN, asked_person=True), "wait_input"),
        (replace(PLAN, progress=True), "next_turn"),
        (replace(PLAN, idle_turns=1, max_idle_turns=2), "next_turn"),
        (replace(PLAN, idle_turns=2, max_idle_turns=2), "stop"),
        (TurnFacts(kind="lightweight"), "complete"),
        (TurnFacts(kind="persistent"), "wait_input"),
        (TurnFacts(kind="lightweight", open_orders=1), "wait_jobs"),
    ],
)
def test_outcomes(facts: TurnFacts, action: str) -> None:
    assert stop_check(facts).action == action


def test_limit_stops_say_why() -> None:
    v = stop_check(replace(PLAN, idle_turns=3, max_idle_turns=2))
    assert v == Verdict("stop", "limit: no meaningful progress in 3 turns")
    assert stop_check(replace(PLAN, steps_exhausted=True)).reason.startswith("limit:")


facts_strategy = st.builds(
    TurnFacts,
    kind=st.sampled_from(["lightweight", "persistent"]),
    stop_requested=st.booleans(),
    paused=st.booleans(),
    steps_exhausted=st.booleans(),
    progress=st.booleans(),
    idle_turns=st.integers(0, 5),
    max_idle_turns=st.integers(1, 4),
    checklist_total=st.integers(0, 5),
    checklist_open=st.integers(0, 5),
    blocked=st.sampled_from(["", "x"]),
    checkpoint_due=st.sampled_from(["", "chk"]),
    open_orders=st.integers(0, 3),
    open_cards=st.integers(0, 2),
    inbox=st.integers(0, 2),
    asked_person=st.booleans(),
)


@given(facts_strategy)
def test_invariants(f: TurnFacts) -> None:
    v = stop_check(f)
    if f.stop_requested:
        assert v.action == "stop"
    if v.action == "next_turn":
        # A new model turn is never spent while waiting on a job, a card or the person.
        assert not (f.open_orders or f.open_cards or f.checkpoint_due or f.stop_requested)
        assert (not f.paused and not f.steps_exhausted and not f.asked_person) or f.inbox
    if v.action == "complete":
        assert not f.open_orders and (f.checklist_total == 0 or f.checklist_open == 0)
    if f.open_orders and not (f.stop_requested or f.paused):
        assert v.action == "wait_jobs"  # waiting on a job is parked, never idle


def test_idle_turns_count_only_model_turns_without_progress() -> None:
    base = TurnSnapshot("persistent", False, False, False, True, 1, 2, 0, [], [], 0, False)
    assert end_facts(base, TurnState(), progress=False).idle_turns == 2
    assert end_facts(base, TurnState(), progress=True).idle_turns == 0
    assert end_facts(base, TurnState(progress=True), progress=False).idle_turns == 0
    rerun = replace(base, model_turn=False)
    assert end_facts(rerun, TurnState(), progress=False).idle_turns == 1

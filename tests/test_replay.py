"""Every recorded history replays against the current workflow code.

A change that makes workflow code nondeterministic fails here. The histories are written by
the live tests that call `replay_and_maybe_record` (tests/runtime_support.py) or keep the
slice's histories (tests/test_slice.py); after a deliberate change of workflow code, record
them all again on SQLite:

    rm tests/histories/*.json
    LOMO_RECORD_HISTORIES=1 .venv/bin/pytest -n 2 -k "not postgres" tests/test_slice.py \
        tests/test_poster_run.py tests/test_context_workflow.py tests/test_flows_run.py \
        tests/test_flows_film.py tests/test_memory_forget_retry.py \
        tests/test_memory_forget_shared.py tests/test_consumed_messages.py \
        tests/test_running_attribute.py tests/test_turn_end_state.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from cli.worker import WORKFLOWS

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))
TEXTS = {p: p.read_text() for p in HISTORIES}


def _workflow_type(path: Path) -> str:
    first = json.loads(TEXTS[path])["events"][0]
    return str(first["workflowExecutionStartedEventAttributes"]["workflowType"]["name"])


def test_histories_are_recorded() -> None:
    assert HISTORIES, "tests/histories/ is empty: nothing guards determinism"
    recorded = {_workflow_type(p) for p in HISTORIES}
    for wf in WORKFLOWS:
        name = wf.__temporal_workflow_definition.name  # type: ignore[attr-defined]
        assert name in recorded, f"no recorded history of {name}"


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_replay(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, TEXTS[path])
    await Replayer(workflows=WORKFLOWS).replay_workflow(history)


def test_cli_replay_detects_nondeterminism(tmp_path: Path) -> None:
    path = next(p for p in HISTORIES if p.stem.startswith("task"))
    ok = subprocess.run(
        [sys.executable, "-m", "cli.main", "replay", "--file", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    # Tamper: rename the first activity the workflow scheduled; the code schedules another.
    data = json.loads(path.read_text())
    for ev in data["events"]:
        attrs = ev.get("activityTaskScheduledEventAttributes")
        if attrs:
            attrs["activityType"]["name"] = "something_else"
            break
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(data))
    res = subprocess.run(
        [sys.executable, "-m", "cli.main", "replay", "--file", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 1, (res.stdout, res.stderr)

"""Every recorded history replays against the current workflow code (ARCHITECTURE §4).

A change that makes workflow code nondeterministic fails here. Record new histories with
`LOMO_RECORD_HISTORIES=1 .venv/bin/pytest tests/test_slice.py -k histories`.
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


def test_histories_are_recorded() -> None:
    assert HISTORIES, "tests/histories/ is empty: nothing guards determinism"


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

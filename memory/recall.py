"""Recall for a step's memory layer: the person's memories and their own words that answer a
query, best first, each with the messages it came from.

Three rankings are fused by reciprocal rank (RRF): the vector index (memory versions and the
person's raw messages, embedded), BM25 over the same texts with their event dates written
out (memory/dates.py) and their neighbouring messages' words, and BM25 over each text alone.
Names, rare words and dates are where embeddings are weak and the lexical side is strong;
paraphrase is the reverse.

SQL is the truth for every candidate: a superseded or deleted version, a forgotten message,
words the person corrected (memory/services.py `withheld_words`) or another task's memory
never comes back, whatever the indexes still hold. A message whose fact changed later comes
with the fact's current version right before it, and is marked as history.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from lomo.db.engine import Database
from lomo.db.models import MessageRow
from memory.dates import dated, day_words
from memory.lexical import BM25
from memory.models import Evidence, Memory, MemoryLink, MemoryVersion
from memory.services import MemoryServices, withheld_words

# Below the usual 60, so the first few places of a ranking decide. Three rankings: the
# vector index; BM25 over each text with its neighbours' words, which counts double, as
# the embedder misses names and dates; and BM25 over each text alone, so the message that
# said the words ranks above the neighbours that only lend them (set on LoCoMo
# conversations 26, 30 and 50).
RRF_K = 10
WEIGHTS = (0.5, 1.0, 0.5)  # vectors, words with their neighbours, words alone
# The messages said just before and just after a message whose words its lexical text
# carries: a reply ("Yes, last week!") is found by what it answered, two turns back when a
# question came in between, and a remark by what it led to ("Where was that?").
BEFORE, AFTER = 2, 1
CORPORA = 64  # people whose lexical index is kept in this process


@dataclass
class Recalled:
    id: str  # a memory version (mv_…) or a piece of evidence (evd_…)
    kind: str  # memory | evidence
    line: str  # what the context shows
    message_ids: list[str] = field(default_factory=list)  # the person's messages behind it
    version_id: str | None = None  # the memory version shown (usage, exclusion later)


@dataclass
class _Corpus:
    fingerprint: tuple[object, ...]
    ids: list[str]
    bm25: BM25  # each text with its neighbours' words
    own: BM25  # each text alone: what was said in it ranks it above its neighbours


_corpora: OrderedDict[tuple[str, str], _Corpus] = OrderedDict()


async def _fingerprint(s: AsyncSession, user_id: str) -> tuple[object, ...]:
    """Changes whenever a text is added, forgotten, replaced, corrected or deleted (two cheap
    reads per query). The corpus may live in another process than the writes (the memory
    service), so SQL is asked, never told; and SQL checks every hit again in any case."""
    ev = (
        await s.execute(
            select(
                func.count(Evidence.id),
                func.count(Evidence.forgotten_at),
                func.max(Evidence.created_at),
                func.max(Evidence.forgotten_at),
            ).where(Evidence.user_id == user_id)
        )
    ).one()
    mv = (
        await s.execute(
            select(
                func.count(MemoryVersion.id),
                func.sum(case((MemoryVersion.status == "active", 1), else_=0)),
                func.max(MemoryVersion.created_at),
                func.max(MemoryVersion.deleted_at),
            ).where(MemoryVersion.user_id == user_id)
        )
    ).one()
    return (*ev, *mv)


async def corpus(db: Database, user_id: str) -> _Corpus:
    """The person's lexical index as recall reads it: built from what SQL allows, cached
    while the fingerprint holds."""
    async with db.session() as s:
        fp = await _fingerprint(s, user_id)
        key = (db.url, user_id)
        cached = _corpora.get(key)
        if cached is not None and cached.fingerprint == fp:
            _corpora.move_to_end(key)
            return cached
        evidence = (
            await s.execute(
                select(Evidence.id, Evidence.text, MessageRow.created_at, Evidence.created_at)
                .outerjoin(MessageRow, MessageRow.id == Evidence.message_id)
                .where(Evidence.user_id == user_id, Evidence.usable.is_(True))
                .order_by(func.coalesce(MessageRow.created_at, Evidence.created_at))
            )
        ).all()
        hidden = await withheld_words(s, user_id)
        evidence = [e for e in evidence if e[0] not in hidden]
        versions = (
            await s.execute(
                select(MemoryVersion.id, MemoryVersion.content, MemoryVersion.valid_from).where(
                    MemoryVersion.user_id == user_id, MemoryVersion.status == "active"
                )
            )
        ).all()
    ids = [e[0] for e in evidence] + [v[0] for v in versions]
    texts = [text for _, text, _, _ in evidence]
    docs = [
        # The dates are the message's own; its neighbours lend their words only.
        " ".join(
            [
                *texts[max(0, i - BEFORE) : i],
                dated(texts[i], said or made),
                *texts[i + 1 : i + 1 + AFTER],
            ]
        )
        for i, (_, _, said, made) in enumerate(evidence)
    ]
    alone = [dated(text, said or made) for _, text, said, made in evidence]
    facts = [dated(content, since) for _, content, since in versions]
    built = _Corpus(fp, ids, BM25(docs + facts), BM25(alone + facts))
    _corpora[key] = built
    while len(_corpora) > CORPORA:
        _corpora.popitem(last=False)
    return built


def fuse(rankings: list[list[str]], weights: tuple[float, ...]) -> list[str]:
    """Reciprocal-rank fusion: ids ordered by the weighted sum of 1/(RRF_K + rank)."""
    score: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, 1):
            score[item] = score.get(item, 0.0) + weight / (RRF_K + rank)
    return sorted(score, key=lambda i: -score[i])


async def recall(
    db: Database,
    services: MemoryServices,
    user_id: str,
    task_id: str,
    query: str,
    limit: int,
    skip: set[str] | None = None,
) -> list[Recalled]:
    """At most `limit` items for `query`, best first (`skip`: versions already shown, the
    profile's). A failing vector index raises: the caller degrades to "no memory"."""
    depth = max(limit * 3, 30)
    hits = await services.search(user_id, task_id, query, depth, evidence=True)
    lex = await corpus(db, user_id)
    rankings = [[h.id for h in hits]]
    rankings += [[lex.ids[i] for i, _ in index.top(query, depth)] for index in (lex.bm25, lex.own)]
    ranked = [i for i in fuse(rankings, WEIGHTS) if i not in (skip or set())]
    async with db.session() as s:
        found = await _checked(s, user_id, task_id, ranked)
        out: list[Recalled] = []
        shown: set[str] = set(skip or ())
        for item_id in ranked:
            item = found.get(item_id)
            if item is None or item.id in shown:
                continue
            if item.kind == "evidence":
                for current in await _current_of(s, user_id, task_id, item):
                    if current.id not in shown:
                        _add(out, current)
                        shown.add(current.id)
            _add(out, item)
            shown.add(item.id)
            if len(out) >= limit:
                break
    return out[:limit]


def _add(out: list[Recalled], item: Recalled) -> None:
    """Words a memory shown already stands for (it cites their message) are left out; a
    memory found after its words takes their place."""
    said = {m for r in out if r.kind == "memory" for m in r.message_ids}
    if item.kind == "evidence" and "(history:" not in item.line:
        if set(item.message_ids) <= said and item.message_ids:
            return
    elif item.kind == "memory":
        covered = set(item.message_ids)
        out[:] = [
            r
            for r in out
            if r.kind != "evidence"
            or "(history:" in r.line
            or not set(r.message_ids) <= covered
            or not r.message_ids
        ]
    out.append(item)


async def _checked(
    s: AsyncSession, user_id: str, task_id: str, ids: list[str]
) -> dict[str, Recalled]:
    """The candidates SQL still vouches for, as context lines."""
    out = {r.id: r for r in await _versions(s, user_id, task_id, ids)}
    ev_ids = [i for i in ids if i.startswith("evd")]
    if not ev_ids:
        return out
    hidden = await withheld_words(s, user_id, ev_ids)
    original = aliased(MessageRow)
    rows = await s.execute(
        select(Evidence, MessageRow.created_at, MessageRow.task_id, original.task_id)
        .outerjoin(MessageRow, MessageRow.id == Evidence.message_id)
        .outerjoin(original, original.id == MessageRow.moved_from)
        .where(Evidence.id.in_(ev_ids), Evidence.user_id == user_id)
    )
    elsewhere = await _said_for_another_task(s, ev_ids, task_id)
    for ev, said, said_in, moved_from in rows.all():
        # The task's own messages are in its context already (recent messages, summaries);
        # words the person moved away from this task were not meant for it.
        if ev.id in hidden or ev.id in elsewhere or task_id in (said_in, moved_from):
            continue
        out[ev.id] = Recalled(
            ev.id,
            "evidence",
            f'"{ev.text}" [said on {_day(said or ev.created_at)}; {ev.source_ref}]',
            [ev.message_id] if ev.message_id else [],
        )
    return out


async def _said_for_another_task(s: AsyncSession, ev_ids: list[str], task_id: str) -> set[str]:
    """Words that made a one-off instruction of a task ("this time ...") belong to that task
    (its message's task now, since routing may decide after extraction), like the memory."""
    rows = await s.execute(
        select(MemoryLink.source_id, Memory.task_id, MessageRow.task_id)
        .join(MemoryVersion, MemoryVersion.id == MemoryLink.target_id)
        .join(Memory, Memory.id == MemoryVersion.memory_id)
        .join(Evidence, Evidence.id == MemoryLink.source_id)
        .outerjoin(MessageRow, MessageRow.id == Evidence.message_id)
        .where(MemoryLink.source_id.in_(ev_ids), Memory.scope == "task")
    )
    return {ev_id for ev_id, m_task, msg_task in rows.all() if task_id not in (m_task, msg_task)}


def _day(at: datetime) -> str:
    return day_words(at.date())


async def _versions(s: AsyncSession, user_id: str, task_id: str, ids: list[str]) -> list[Recalled]:
    """Active, visible versions among `ids`, with their usable sources."""
    mv_ids = [i for i in ids if not i.startswith("evd")]
    if not mv_ids:
        return []
    rows = (
        await s.execute(
            select(MemoryVersion, Memory)
            .join(Memory, Memory.id == MemoryVersion.memory_id)
            .where(MemoryVersion.id.in_(mv_ids))
        )
    ).all()
    sources = await _sources(s, [v.id for v, _ in rows])
    out = []
    for v, m in rows:
        visible = m.scope != "task" or m.task_id == task_id
        if v.status != "active" or m.status != "active" or m.user_id != user_id or not visible:
            continue
        src = sources.get(v.id, [])
        where = ", ".join(f"{rel} {ref}" for rel, ref, _ in src)
        line = f"{v.content} [{m.id} v{v.version}, {m.kind}, {m.scope}; {where}]"
        messages = [mid for _, _, mid in src if mid]
        out.append(Recalled(v.id, "memory", line, messages, v.id))
    return out


async def _sources(
    s: AsyncSession, version_ids: list[str]
) -> dict[str, list[tuple[str, str, str | None]]]:
    rows = await s.execute(
        select(MemoryLink.target_id, MemoryLink.relation, Evidence.source_ref, Evidence.message_id)
        .join(Evidence, Evidence.id == MemoryLink.source_id)
        .where(MemoryLink.target_id.in_(version_ids), Evidence.usable.is_(True))
        .order_by(MemoryLink.id)
    )
    out: dict[str, list[tuple[str, str, str | None]]] = {}
    for target, relation, ref, message_id in rows.all():
        out.setdefault(target, []).append((relation, ref, message_id))
    return out


async def _current_of(
    s: AsyncSession, user_id: str, task_id: str, item: Recalled
) -> list[Recalled]:
    """For words whose fact has changed since: the fact's current version (shown first), and
    the words marked as history."""
    rows = (
        await s.execute(
            select(Memory.id, Memory.current_version, MemoryVersion.version)
            .join(MemoryVersion, MemoryVersion.memory_id == Memory.id)
            .join(MemoryLink, MemoryLink.target_id == MemoryVersion.id)
            .where(
                MemoryLink.source_id == item.id,
                MemoryVersion.status != "active",
                Memory.status == "active",
            )
        )
    ).all()
    changed = {mid: current for mid, current, version in rows if version < current}
    if not changed:
        return []
    current_ids = list(
        await s.scalars(
            select(MemoryVersion.id).where(
                MemoryVersion.memory_id.in_(changed), MemoryVersion.status == "active"
            )
        )
    )
    currents = await _versions(s, user_id, task_id, current_ids)
    if currents:
        item.line += " (history: changed since; the current version is shown)"
    return currents

"""Search back into the task's own history (docs/architecture.md#context).

Segment summaries replace old steps in the context, so details (a prompt, a size, an id, the
person's exact words) are lost to the model. `search_history` finds them again in the
journal itself: the person's messages, the model's replies and tool calls, tool results and
the outputs kept outside the context, matched by meaning (the worker's embedder) and by
words, and returns the exact passages with their step numbers, a page at a time.

What forgetting removed stays removed: forgotten messages and the steps built on forgotten
content are left out (as the context leaves them out), results and outputs are read as the
forget cascade scrubbed them, and every passage is scrubbed once more against the person's
forget requests, so a reply that quoted forgotten words does not bring them back.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from context.types import call_order
from llm.types import ToolSpec
from lomo.db.context import ToolOutput
from lomo.db.models import MessageRow, ModelStep, ToolCall
from memory.context import exclusions
from memory.models import Evidence, ForgetRecord
from memory.scrub import needles, scrub
from memory.services import get_services
from memory.text import normalize, tokens
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult, error
from vectors.embeddings import Embedder

PASSAGE_CHARS = 600  # one passage: a few sentences, or one slice of a large output
PAGE_MAX = 10
MEANING_MIN = 0.22  # below this cosine (USE v3: unrelated texts stay under ~0.2) no match
WORDS_MIN = 0.25  # below this share of the query's (rarity-weighted) words no match
EMBED_MAX = 2000  # passages embedded per search (the newest; word matches always count)
OUTPUT_EMBED_MAX = 64  # slices of kept-outside outputs embedded per search
# Where a passage may end: after a sentence or a line, else after a comma (JSON lists).
_BREAKS = (re.compile(r"(?<=[.!?\n])\s+"), re.compile(r"(?<=[,;])\s+"))


@dataclass(frozen=True, slots=True)
class Passage:
    step: int  # the step's number in the task (1-based, as the summaries count)
    turn: int
    turn_step: int
    source: str  # person | reply | call <tool> | result <tool> | output <handle>
    text: str
    offset: int = 0  # where the passage starts in its source (an output's read offset)


@dataclass(frozen=True, slots=True)
class Hit:
    passage: Passage
    score: float
    words: float
    meaning: float


def split_exact(text: str, size: int = PASSAGE_CHARS) -> list[tuple[int, str]]:
    """The text cut into passages of at most `size` characters at sentence or line ends
    where possible; each passage is an exact slice, with its offset."""
    out: list[tuple[int, str]] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            end = _last_break(text, start + size // 2, end) or end
        piece = text[start:end]
        if normalize(piece):  # a passage without a word ("{}") matches nothing real
            out.append((start + len(piece) - len(piece.lstrip()), piece.strip()))
        start = end
    return out


def _last_break(text: str, lo: int, hi: int) -> int | None:
    for pattern in _BREAKS:
        cuts = [m.end() for m in pattern.finditer(text, lo, hi)]
        if cuts:
            return cuts[-1]
    return None


def step_passages(
    ordinal: int, turn: int, step: int, said: Iterable[str], response: dict[str, Any]
) -> list[Passage]:
    """What the person said at a step, the model's reply and the calls it planned."""
    out: list[Passage] = []
    texts: list[tuple[str, str]] = [("person", t) for t in said]
    for block in response.get("content", []):
        if block.get("type") == "text":
            texts.append(("reply", str(block.get("text", ""))))
        elif block.get("type") == "tool_use":
            args = json.dumps(block.get("input", {}), ensure_ascii=False)
            texts.append((f"call {block.get('name')}", args))
    for source, text in texts:
        out.extend(
            Passage(ordinal, turn, step, source, piece, at) for at, piece in split_exact(text)
        )
    return out


def result_passages(ordinal: int, call: ToolCall) -> list[Passage]:
    """A call's result as the journal keeps it (a kept-outside output is searched in the
    output itself, not in its preview)."""
    turn, step, _ = call_order(call.call_id)
    shown = {
        k: v
        for k, v in (call.result or {}).items()
        if not k.startswith("_") and k not in ("preview", "note")
    }
    if not shown:
        return []
    text = json.dumps(shown, ensure_ascii=False)
    source = f"result {call.name}"
    return [Passage(ordinal, turn, step, source, p, at) for at, p in split_exact(text)]


def word_scores(query: str, passages: Sequence[Passage]) -> list[float]:
    """How much of the query each passage holds, each word weighted by its rarity in this
    history (a word in every line of a log says little; an id or a name says much); the
    query's words in a row count fully."""
    words = tokens(query)
    phrase = normalize(query)
    have = [tokens(p.text) & words for p in passages]
    if not words:
        return [0.0] * len(passages)
    df = {w: sum(1 for h in have if w in h) for w in words}
    idf = {w: math.log(1 + len(passages) / (1 + df[w])) for w in words}
    total = sum(idf.values())
    out = [sum(idf[w] for w in h) / total for h in have]
    if len(words) > 1:
        for i, p in enumerate(passages):
            if out[i] and phrase in normalize(p.text):
                out[i] = 1.0
    return out


def rank(
    passages: Sequence[Passage],
    words: Sequence[float],
    vectors: dict[int, list[float]],
    query_vec: list[float] | None,
) -> list[Hit]:
    """Passages that hold enough of the query's words or are close to it in meaning, best
    first (ties: the later step first). `vectors`: index → vector of the passages
    embedded."""
    hits: list[Hit] = []
    for i, p in enumerate(passages):
        w = words[i] if words[i] >= WORDS_MIN else 0.0
        m = _cosine(query_vec, vectors.get(i))
        if w > 0 or m >= MEANING_MIN:
            hits.append(Hit(p, round(0.5 * w + 0.5 * max(m, 0.0), 4), w, m))
    hits.sort(key=lambda h: (-h.score, -h.passage.step, h.passage.offset))
    return hits


def _cosine(a: list[float] | None, b: list[float] | None) -> float:
    if a is None or b is None:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=True))  # both unit length


def hit_view(h: Hit) -> dict[str, Any]:
    p = h.passage
    kind = "+".join(
        k for k, v in (("words", h.words > 0), ("meaning", h.meaning >= MEANING_MIN)) if v
    )
    out: dict[str, Any] = {
        "step": p.step,
        "turn": p.turn,
        "turn_step": p.turn_step,
        "source": p.source,
        "match": kind,
        "text": p.text,
    }
    if p.source.startswith("output "):
        out["output_handle"], out["output_offset"] = p.source.split(" ", 1)[1], p.offset
    return out


class _VectorCache:
    """The vectors of recently searched passages, per embedder (the same history is
    searched again and again)."""

    def __init__(self, size: int = 8192) -> None:
        self.size = size
        self.vectors: OrderedDict[tuple[str, str], list[float]] = OrderedDict()

    async def embed(self, embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
        keys = [(embedder.name, hashlib.sha256(t.encode()).hexdigest()) for t in texts]
        # Read before the thread hop: another search may evict entries meanwhile.
        got = {k: self.vectors[k] for k in keys if k in self.vectors}
        missing = list(dict.fromkeys(k for k in keys if k not in got))
        if missing:
            by_key = dict(zip(keys, texts, strict=True))
            new = await asyncio.to_thread(embedder.embed, [by_key[k] for k in missing])
            got.update(zip(missing, new, strict=True))
        for k in keys:
            self.vectors[k] = got[k]
            self.vectors.move_to_end(k)
        while len(self.vectors) > self.size:
            self.vectors.popitem(last=False)
        return [got[k] for k in keys]


_CACHE = _VectorCache()

# Their calls and results repeat other history (pages of an output, earlier searches, a
# guide from the catalogue): searching them would only echo.
ECHOES = ("search_history", "read_output", "load_guide")


async def forget_needles(s: AsyncSession, user_id: str) -> list[frozenset[str]]:
    """The person's forget requests as the cascade matched them: the words asked to be
    forgotten, or, for a memory forgotten by id, every sentence of its evidence."""
    texts: list[str] = []
    by_id: list[str] = []
    for rec in await s.scalars(select(ForgetRecord).where(ForgetRecord.user_id == user_id)):
        said = (rec.request or {}).get("text")
        if said:
            texts.append(str(said))
        else:
            by_id.extend(str(e) for e in rec.evidence_ids or [])
    if by_id:
        texts.extend(await s.scalars(select(Evidence.text).where(Evidence.id.in_(by_id))))
    return needles(texts)


async def history_passages(s: AsyncSession, user_id: str, task_id: str) -> list[Passage]:
    """Every searchable passage of the task's stored steps, without what forgetting
    removed (see the module's docstring)."""
    excl = await exclusions(s, user_id)
    skip = {(t, n) for tid, t, n in excl.step_keys if tid == task_id}
    rows = (
        await s.execute(
            select(ModelStep.turn, ModelStep.step, ModelStep.response)
            .where(ModelStep.task_id == task_id)
            .order_by(ModelStep.id)
        )
    ).all()
    ordinal = {(t, n): i + 1 for i, (t, n, _) in enumerate(rows)}
    said: dict[tuple[int, int], list[str]] = {}
    for m in await s.scalars(
        select(MessageRow)
        .where(MessageRow.task_id == task_id, MessageRow.user_id == user_id)
        .where(MessageRow.processed_turn.is_not(None))
        .order_by(MessageRow.created_at)
    ):
        if m.id not in excl.message_ids:
            said.setdefault((m.processed_turn or 0, m.processed_step or 0), []).append(m.text)
    out: list[Passage] = []
    for t, n, response in rows:
        if (t, n) not in skip:
            out.extend(step_passages(ordinal[t, n], t, n, said.get((t, n), []), response))
    for call in await s.scalars(
        select(ToolCall).where(ToolCall.task_id == task_id, ToolCall.result.is_not(None))
    ):
        at = call_order(call.call_id)[:2]
        if at in ordinal and at not in skip and call.name not in ECHOES:
            out.extend(result_passages(ordinal[at], call))
    for o in await s.scalars(
        select(ToolOutput).where(ToolOutput.task_id == task_id, ToolOutput.user_id == user_id)
    ):
        t, n, _ = call_order(o.call_id)
        if (t, n) in ordinal and (t, n) not in skip:
            out.extend(
                Passage(ordinal[t, n], t, n, f"output {o.id}", piece, at)
                for at, piece in split_exact(o.content)
            )
    return _scrubbed(out, await forget_needles(s, user_id))


def _scrubbed(passages: list[Passage], found: list[frozenset[str]]) -> list[Passage]:
    """Passages without the sentences that quote a forget request (none left: dropped)."""
    if not found:
        return passages
    out = []
    for p in passages:
        new = scrub(p.text, found)
        if new is None:
            out.append(p)
        elif new != "[forgotten]":
            out.append(Passage(p.step, p.turn, p.turn_step, p.source, new, p.offset))
    return out


def _page(hits: list[Hit], chars: int) -> list[Hit]:
    """As many hits as fit a page of `chars` characters of passage text (at least one)."""
    out: list[Hit] = []
    used = 0
    for h in hits:
        if out and used + len(h.passage.text) > chars:
            break
        out.append(h)
        used += len(h.passage.text)
    return out


class SearchHistory(Tool):
    """Find details of the task's earlier steps that summaries no longer show."""

    idempotent = True
    inline_output = True  # a page holds at most tool_output_page_chars of passages

    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps
        self.spec = ToolSpec(
            name="search_history",
            description="Search this task's earlier steps (the person's messages, your "
            "replies and tool calls, tool results and outputs kept outside the context) by "
            "meaning and by words. Returns the exact passages with their step numbers, "
            f"at most `limit` (≤ {PAGE_MAX}) from `offset`, as many as fit one page; "
            "`next_offset` pages on. Use it when "
            "a summary lost a detail: a prompt, a size, an id, the person's exact words.",
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "offset": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": PAGE_MAX},
                },
                "required": ["query"],
            },
        )

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        query = str(args.get("query") or "").strip()[:500]
        try:
            offset = int(args.get("offset", 0))
            limit = min(int(args.get("limit", 5)), PAGE_MAX)
        except (TypeError, ValueError):
            return error("offset and limit must be integers")
        if not query or offset < 0 or limit < 1:
            return error("query must not be empty, offset must be ≥ 0 and limit ≥ 1")
        async with self.deps.db.session() as s:
            found = await history_passages(s, ctx.user_id, ctx.task_id)
        # The step that searches is not yet history (its own call would match the query).
        found = [p for p in found if (p.turn, p.turn_step) != (ctx.turn, ctx.step)]
        found = [p for p in found if p.source.split(" ")[-1] not in ECHOES]
        hits, degraded = await self._rank(query, found)
        page = _page(hits[offset : offset + limit], self.deps.settings.tool_output_page_chars)
        end = offset + len(page)
        out: dict[str, Any] = {
            "query": query,
            "total": len(hits),
            "offset": offset,
            "next_offset": end if end < len(hits) else None,
            "passages": [hit_view(h) for h in page],
        }
        if degraded:
            out["degraded"] = degraded
        return ToolResult("done", out)

    async def _rank(self, query: str, found: list[Passage]) -> tuple[list[Hit], str | None]:
        """Ranked hits; by words alone (and why) when the embedder fails."""
        words = word_scores(query, found)
        # Outputs can be megabytes: only their slices that hold most of the query's words
        # are embedded; everything else is, the newest first.
        outputs = [i for i, p in enumerate(found) if p.source.startswith("output ")]
        best = sorted((i for i in outputs if words[i] > 0), key=lambda i: -words[i])
        rest = [i for i, p in enumerate(found) if not p.source.startswith("output ")]
        chosen = sorted(rest, key=lambda i: -found[i].step)[:EMBED_MAX] + best[:OUTPUT_EMBED_MAX]
        try:
            embedder = get_services(self.deps.settings).embedder
            vecs = await _CACHE.embed(embedder, [query, *(found[i].text for i in chosen)])
        except Exception as e:  # the embedder is local; a failure must not fail the search
            return rank(found, words, {}, None), f"searched by words only: {e!r}"[:200]
        return rank(found, words, dict(zip(chosen, vecs[1:], strict=True)), vecs[0]), None

"""Search back into compressed history through the real activities, the real SDK against
the Messages-API stand-in, the real memory extraction and forget cascade
(tests/context_support.py): after segment summaries replaced the early steps, the agent's
`search_history` finds their exact passages again by words and by meaning (the real
multilingual embedder), pages through many hits, and never returns what forgetting removed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from llm.types import ModelRequest, ModelResponse
from lomo.db.context import ToolOutput
from lomo.db.models import ToolCall
from memory.forget import forget
from memory.scrub import needles
from memory.services import MemoryServices, install_services
from standin.model import OfflineModel
from tests.context_support import _text, _use, context_run, request_text
from tools.base import ToolCallContext
from tools.history import (
    PAGE_MAX,
    Passage,
    _scrubbed,
    _VectorCache,
    history_passages,
    split_exact,
)
from vectors.edge import EdgeVectorIndex
from vectors.embeddings import FakeEmbedder, UsemEmbedder

TURN, SEGMENT, RECENT = 5, 4, 3
SOUNDTRACK = "For the soundtrack I would like a slow acoustic guitar, nothing with drums."
BLUE = "Our brand's main colour is blue."
FINALS = "For the finals use a landscape frame, 1024 by 768, and keep the headline band empty."
SAID = {5: [SOUNDTRACK], 10: [FINALS], 13: [BLUE]}


@dataclass
class HistoryPolicy:
    """A poster task whose early details (a prompt, the person's wishes, a 2 MB log) end up
    behind segment summaries; at the last step it searches for one of them."""

    turn_len: int
    requests: list[ModelRequest] = field(default_factory=list)

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        if request.purpose != "task_step":
            return await OfflineModel().complete(request)
        n = len(self.requests)
        self.requests.append(request)
        if n == 0:
            prompt = "lighthouse at dusk, flat screen-print, two inks"
            return _use(n, "generate_image", {"prompt": prompt, "width": 7, "height": 7})
        if n == 1:
            return _use(n, "export_log", {})
        if n == 15:
            return _use(n, "search_history", {"query": "lighthouse", "limit": 3})
        if n == 4:
            return _text("The style block is: ochre and deep teal, coarse grain.")
        if n == 14:
            return _text(f"Noted: {BLUE[0].lower()}{BLUE[1:]} Next come the finals.")
        if n % self.turn_len == self.turn_len - 1:
            return _text(f"Part {n // self.turn_len + 1} is done.")
        return _use(n, "list_objects", {})


def test_a_passage_quoting_a_forget_request_loses_that_sentence() -> None:
    found = needles(["our brand colour is blue"])
    keep = Passage(3, 1, 3, "reply", "Poster two is done.")
    quoted = Passage(4, 1, 4, "reply", "Noted: our brand's main colour is blue. Next: finals.")
    only = Passage(5, 2, 1, "person", "Our brand's main colour is blue!")
    out = _scrubbed([keep, quoted, only], found)
    assert [p.text for p in out] == ["Poster two is done.", "Next: finals."]
    assert _scrubbed([keep, quoted], []) == [keep, quoted]


async def test_passage_vectors_are_cached_and_bounded() -> None:
    class Counting(FakeEmbedder):
        def __init__(self) -> None:
            super().__init__(16)
            self.seen: list[str] = []

        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            self.seen.extend(texts)
            return super().embed(texts)

    e, cache = Counting(), _VectorCache(size=3)
    first = await cache.embed(e, ["a b", "c d", "a b"])
    assert e.seen == ["a b", "c d"] and first[0] == first[2]
    assert await cache.embed(e, ["c d"]) == [first[1]] and len(e.seen) == 2
    await cache.embed(e, ["e", "f", "g"])
    assert len(cache.vectors) == 3
    await cache.embed(e, ["a b"])  # evicted: embedded again
    assert e.seen[-1] == "a b"


def test_passages_are_exact_slices() -> None:
    text = "First sentence here. " * 40 + "x" * 900
    pieces = split_exact(text, 100)
    assert all(text[at : at + len(p)] == p and len(p) <= 100 for at, p in pieces)
    assert "".join(p for _, p in pieces).replace(" ", "") == text.replace(" ", "")
    assert split_exact("{}   ") == [] and split_exact("  {ok}") == [(2, "{ok}")]
    lines = json.dumps([f"entry {i:06d}: frame rendered" for i in range(100)])
    for _, p in split_exact(lines, 200):  # a list is cut between its items
        assert p.startswith(('["entry', '"entry')) and p.endswith(('",', '"]')), p


async def test_search_finds_compressed_details_by_words_and_meaning_pages_and_forgets(
    db_url: str, tmp_path: Path
) -> None:
    async with context_run(
        db_url,
        tmp_path,
        HistoryPolicy(TURN),  # type: ignore[arg-type]
        context_segment_steps=SEGMENT,
        context_recent_steps=RECENT,
    ) as run:
        for n in range(15):
            await run.step(n, SAID.get(n))
        # From here on the platform's real multilingual embedder (the steps above ran on the
        # test's hash embedder): meaning without shared words.
        install_services(
            run.settings, MemoryServices(EdgeVectorIndex(tmp_path / "usem"), UsemEmbedder())
        )
        search = run.runtime.tools["search_history"]
        ctx = ToolCallContext(run.task_id, run.user_id, f"{run.task_id}:99:1:0", 99, 1, 0)

        async def ask(query: str, **page: int) -> dict[str, Any]:
            res = await search.run(ctx, {"query": query, **page})
            assert res.status == "done", res.result
            return res.result

        transcript: list[str] = []

        def show(out: dict[str, Any]) -> None:
            transcript.append(f"> search_history({out['query']!r}): {out['total']} hits")
            for p in out["passages"][:3]:
                at = max(0, p["text"].find(out["query"].split()[-1]) - 40)
                transcript.append(
                    f"  step {p['step']} ({p['source']}, {p['match']}): "
                    f"{p['text'][at : at + 110]!r}"
                )

        # The early steps are behind summaries now: the prompt is no longer in the context.
        last = request_text(run.policy.requests[-1])
        assert "lighthouse" not in last and SOUNDTRACK not in last
        # 1. Words: the prompt of a call at step 1, exactly as it was sent.
        out = await ask("lighthouse")
        show(out)
        top = out["passages"][0]
        assert (top["step"], top["source"]) == (1, "call generate_image")
        assert top["match"].startswith("words")
        assert "lighthouse at dusk, flat screen-print, two inks" in top["text"]
        # A line deep inside the 2 MB output kept outside the context: its handle and offset
        # read the same text back.
        out = await ask("entry 012345")
        show(out)
        hit = out["passages"][0]
        async with run.db.session() as s:
            kept = await s.get(ToolOutput, hit["output_handle"])
        assert kept is not None and hit["step"] == 2 and "entry 012345" in hit["text"]
        at = hit["output_offset"]
        assert kept.content[at : at + len(hit["text"])] == hit["text"]
        show(await ask("style block"))  # the model's own reply at step 5
        # 2. Paging: many hits, `limit` at a time, no passage twice, the end says so.
        first = await ask("entry frame rendered", limit=PAGE_MAX)
        n = first["next_offset"]
        second = await ask("entry frame rendered", offset=n, limit=PAGE_MAX)
        tail = await ask("entry frame rendered", offset=first["total"] - 2, limit=PAGE_MAX)
        # A page holds what fits the page size of read_output, whatever `limit` allows.
        assert first["total"] > 1000 and 1 < n == len(first["passages"]) < PAGE_MAX
        page_chars = run.settings.tool_output_page_chars
        assert sum(len(p["text"]) for p in first["passages"]) <= page_chars
        assert second["offset"] == n and second["next_offset"] == n + len(second["passages"])
        keys = [(p["source"], p.get("output_offset"), p["step"]) for p in first["passages"]]
        keys2 = [(p["source"], p.get("output_offset"), p["step"]) for p in second["passages"]]
        assert len(set(keys + keys2)) == len(keys) + len(keys2)
        assert len(tail["passages"]) == 2 and tail["next_offset"] is None
        # 3. Before forgetting, the colour is there to be found (so step 4 can fail).
        before = await ask("brand colour blue")
        show(before)
        assert any("blue" in p["text"] for p in before["passages"]), before
        # 4. Forgetting: the message, the step that read it and the reply that repeated it
        # never come back.
        async with run.db.session() as s:
            done = await forget(
                s, run.user_id, "crd_forget_h", None, "our brand colour is blue", 20
            )
        assert done.evidence_ids
        after = await ask("brand colour blue", limit=PAGE_MAX)
        show(after)
        assert all("blue" not in p["text"].lower() for p in after["passages"]), after
        async with run.db.session() as s:
            everything = await history_passages(s, run.user_id, run.task_id)
        assert everything and not any("blue" in p.text.lower() for p in everything)
        # Kept: everything before the person said it (the steps after it showed the memory
        # in their profile and are left out, as the context leaves them out).
        assert {p.step for p in everything} == set(range(1, 14))
        # 5. The agent's own call, through the runtime: the result is journaled and shown.
        await run.step(15)
        async with run.db.session() as s:
            call = await s.scalar(select(ToolCall).where(ToolCall.name == "search_history"))
        assert call is not None and call.status == "done", call
        assert (call.result or {})["passages"][0]["step"] == 1
        # 6. Meaning: no word shared with the query, in English and in German.
        for query in ("what did the person want for the music", "Welche Musik wollte die Person?"):
            out = await ask(query)
            show(out)
            top = out["passages"][0]
            assert (top["text"], top["source"], top["match"]) == (SOUNDTRACK, "person", "meaning")
            assert top["step"] == 6  # turn 2, step 1: the sixth step of the task
        out = await ask("how wide should the final posters be")
        show(out)
        assert out["passages"][0]["text"] == FINALS
    print("\n".join(transcript))

"""Context engineering (article §6) on a long task through the real activities and the real
SDK against the stand-in (tests/context_support.py): the bytes before the first cache
breakpoint never change, the stable prefix changes only for a recorded reason, domain tools
load on demand, a 2 MB tool result stays outside the context and is paged, closed segments
are summarized once and appended, and the prompt cache is measured as the API reports it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, cast

import httpx
from sqlalchemy import select
from temporalio.client import Client

from activities.context_tools import PREVIEW_CHARS
from activities.segments import step_line
from api.app import create_app
from lomo.db.context import ContextSegment, ToolOutput
from lomo.db.models import MessageRow, ModelStep, Task, ToolCall
from memory.forget import forget
from tests.context_support import OPENING, Policy, cached_share, context_run
from tests.helpers import ThreadServer
from workflows.types import SegmentInput

TURN, SEGMENT, RECENT, STEPS = 6, 5, 4, 46  # the last step closes no segment
EXPORT_AT, MEMORY_AT, EDIT_AT, PROFILE_AT = (5, 30), 13, 20, 24
PAGE = 4000


def _task_bodies(app: Any) -> list[dict[str, Any]]:
    return [
        b
        for b in app.state.requests
        if b.get("system") and b["system"][0]["text"].startswith("You are Lomo")
    ]


def _until_first_breakpoint(body: dict[str, Any]) -> str:
    tools = body["tools"]
    first = next(i for i, t in enumerate(tools) if "cache_control" in t)
    return json.dumps(tools[: first + 1], sort_keys=True)


async def test_long_task_keeps_its_prefix_loads_domains_pages_outputs_and_summarizes(
    db_url: str, tmp_path: Path
) -> None:
    policy = Policy(TURN, PAGE, MEMORY_AT, EXPORT_AT)
    async with context_run(
        db_url,
        tmp_path,
        policy,
        context_segment_steps=SEGMENT,
        context_recent_steps=RECENT,
        tool_output_page_chars=PAGE,
    ) as run:
        for n in range(STEPS):
            if n == EDIT_AT:
                await run.person_edits()
            said = ["Our brand's main colour is teal."] if n == PROFILE_AT else None
            await run.step(n, said)
        steps = await run.steps()
        bodies = _task_bodies(run.app)
        # The summary's idempotency key: asking again for a written segment asks no model.
        asked = len(run.app.state.requests)
        await run.env.run(run.segments.summarize_segment, SegmentInput(run.task_id, 0))
        assert len(run.app.state.requests) == asked
        # What the person's API shows of the last context: layers with tokens and caching.
        app = create_app(run.settings, temporal=cast(Client, object()))
        with ThreadServer(app) as srv:
            async with httpx.AsyncClient(base_url=srv.url, timeout=60) as api:
                r = await api.get(
                    f"/v1/tasks/{run.task_id}/context",
                    headers={"Authorization": f"Bearer {run.token}"},
                )
        assert r.status_code == 200, r.text
        shown = r.json()
        async with run.db.session() as s:
            calls = {
                c.call_id: c
                for c in await s.scalars(select(ToolCall).where(ToolCall.task_id == run.task_id))
            }
            outputs = list(await s.scalars(select(ToolOutput)))
            msgs = {m.id: m for m in await s.scalars(select(MessageRow))}
            segments = list(
                await s.scalars(select(ContextSegment).order_by(ContextSegment.segment))
            )

    assert len(steps) == len(bodies) == STEPS
    # 1. The wire: the bytes up to the first breakpoint are the same in every request.
    assert len({_until_first_breakpoint(b) for b in bodies}) == 1
    # 2. The stable prefix changed only with a recorded reason, and each reason happened.
    prefixes = [st.context["prefix"] for st in steps]
    changes = [c for p in prefixes for c in p["changes"]]
    assert "unexplained" not in changes and not any("core tools" in c for c in changes)
    for prev, now in itertools.pairwise(prefixes):
        assert (now["stable_sha"] != prev["stable_sha"]) == bool(now["changes"]), now
    assert "domain load: documents" in changes
    assert "domain load: memory" in changes
    assert any(c.startswith("profile v") for c in changes), changes
    # 3. Domain tools: the stable prefix names only core tools; loading appends after it.
    first_tools = [t["name"] for t in bodies[0]["tools"]]
    assert "create_document" not in first_tools and "load_tools" in first_tools
    assert "create_document" in [t["name"] for t in bodies[2]["tools"]]
    assert prefixes[0]["loaded_tool_tokens"] == 0 < prefixes[-1]["loaded_tool_tokens"]
    # A call to a tool of a domain never loaded ran through its own checks and says so.
    recall = next(c for c in calls.values() if c.name == "recall_memory")
    assert "was not loaded" in (recall.result or {})["visibility"]
    assert "recall_memory" in [t["name"] for t in bodies[MEMORY_AT + 1]["tools"]]
    # 4. The 2 MB result stayed outside: the next context is small, page 3 reads back.
    assert len(outputs) == len(EXPORT_AT) and all(o.size > 2_000_000 for o in outputs)
    export = next(c for c in calls.values() if c.name == "export_log")
    exported = export.result or {}
    assert exported["output_handle"] == outputs[0].id
    assert len(exported["preview"]) == PREVIEW_CHARS
    after = steps[EXPORT_AT[0] + 1].context
    assert sum(layer["tokens"] for layer in after["layers"]) < 6_000
    assert len(json.dumps(bodies[EXPORT_AT[0] + 1])) < 40_000
    page3 = next(c for c in calls.values() if c.name == "read_output")
    page = page3.result or {}
    assert page["text"] == outputs[0].content[2 * PAGE : 3 * PAGE]
    assert page["offset"] == 2 * PAGE and page["next_offset"] == 3 * PAGE
    # 5. Closed segments: summarized once by the model, shorter than their steps; the
    # opening request stays verbatim at the start of every later context.
    closed = (STEPS - RECENT) // SEGMENT
    assert [g.segment for g in segments] == list(range(closed))
    last = bodies[-1]["messages"][0]["content"]
    assert last[0]["text"] == OPENING
    summaries = [b["text"] for b in last[1:] if b["text"].startswith("[runtime] summary")]
    assert len(summaries) == closed
    for g, text in zip(segments, summaries, strict=True):
        assert g.text in text and g.text.endswith(".")
    by_use = {c.tool_use_id: c for c in calls.values()}
    for g in segments:  # shorter than the one line per step it replaces
        lines = [step_line(st, msgs, by_use) for st in steps[g.first_step : g.last_step + 1]]
        assert 0 < len(g.text) < len("\n".join(lines)), g.text
    # 6. GET /v1/tasks/{id}/context: each layer's tokens and whether the cache serves it.
    names = [layer["name"] for layer in shown["layers"]]
    assert names == [
        "stable_prefix",
        "loaded_tools",
        "segment_summaries",
        "recent_messages",
        "dynamic_tail",
    ]
    cached = {layer["name"]: layer["cached"] for layer in shown["layers"]}
    assert cached["stable_prefix"] is True and cached["segment_summaries"] is True
    assert cached["recent_messages"] == "partly" and cached["dynamic_tail"] is False
    assert all(layer["tokens"] > 0 for layer in shown["layers"])
    assert shown["loaded_domains"] == ["documents", "memory"]
    assert 0 < shown["tool_tokens"]["loaded"] < shown["tool_tokens"]["core"]
    assert shown["usage"]["cache_read_input_tokens"] > 0
    # 7. The cache, as the API would report it: after the first step most input is read.
    shares = [cached_share(st) for st in steps]
    assert shares[0] == 0.0
    assert sum(shares[1:]) / (STEPS - 1) > 0.8, shares  # 0.86 here; the bench: 93 %


async def test_forgetting_scrubs_goal_summaries_and_stored_contexts(
    db_url: str, tmp_path: Path
) -> None:
    opening = "Our brand's main colour is blue. Plan a poster series for the bakery."
    policy = Policy(TURN, PAGE, MEMORY_AT, ())
    async with context_run(
        db_url,
        tmp_path,
        policy,
        opening=opening,
        context_segment_steps=SEGMENT,
        context_recent_steps=RECENT,
    ) as run:
        for n in range(12):
            await run.step(n)
        async with run.db.session() as s:
            quoted = list(await s.scalars(select(ContextSegment)))
            task = await s.get(Task, run.task_id)
            assert task is not None and "blue" in task.goal
        # The first segment's summary quotes the opening request: the cascade must reach it.
        assert any("blue" in g.text for g in quoted), [g.text for g in quoted]
        # So must a tool result that quoted it, in the journal and kept outside the context.
        said = {"memories": ["Our brand's main colour is blue. [mem_x v1]", "Font: Futura."]}
        async with run.db.session() as s:
            s.add(
                ToolCall(
                    call_id=f"{run.task_id}:99:1:0",
                    task_id=run.task_id,
                    tool_use_id="toolu_recalled",
                    name="recall_memory",
                    input={"query": "brand"},
                    status="done",
                    result=said,
                )
            )
            s.add(
                ToolOutput(
                    id="out_quoted",
                    user_id=run.user_id,
                    task_id=run.task_id,
                    call_id=f"{run.task_id}:99:1:1",
                    content=json.dumps(said),
                    size=len(json.dumps(said)),
                )
            )
        async with run.db.session() as s:
            result = await forget(
                s, run.user_id, "crd_forget1", None, "our brand colour is blue", 20
            )
        assert result.evidence_ids
        async with run.db.session() as s:
            task = await s.get(Task, run.task_id)
            assert task is not None
            assert "blue" not in task.goal and "poster series" in task.goal
            segs = list(await s.scalars(select(ContextSegment)))
            assert all("blue" not in g.text for g in segs)
            assert any(g.status == "deleted" for g in segs)
            for st in await s.scalars(select(ModelStep)):
                assert "blue" not in json.dumps(st.context["layers"]).lower(), st.step
            call = await s.get(ToolCall, f"{run.task_id}:99:1:0")
            out = await s.get(ToolOutput, "out_quoted")
            assert call is not None and out is not None
            assert call.result == {"memories": ["[mem_x v1]", "Font: Futura."]}
            assert json.loads(out.content) == call.result and out.size == len(out.content)
        before = len(run.app.state.requests)
        await run.step(12)
        sent = [json.dumps(b).lower() for b in run.app.state.requests[before:]]
        assert sent and all("blue" not in b for b in sent)

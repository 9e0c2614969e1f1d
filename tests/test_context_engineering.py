"""Context engineering on a long task through the real activities and the real
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

from activities.types import SegmentInput
from api.app import create_app
from context.segments import ContextPolicy, step_line
from lomo.db.context import ContextSegment, ToolOutput
from lomo.db.models import MessageRow, ModelStep, Task, ToolCall
from memory.forget import forget
from tests.context_support import (
    OPENING,
    Policy,
    cached_prefix_until_first_breakpoint,
    cached_share,
    context_now,
    context_run,
    unexplained_prefix_changes,
)
from tests.helpers import ThreadServer
from tools.context import PREVIEW_CHARS

TURN, SEGMENT, RECENT, STEPS = 6, 5, 4, 46  # the last step closes no segment
EXPORT_AT, MEMORY_AT, EDIT_AT, PROFILE_AT = (5, 30), 13, 20, 24
PAGE = 4000


def _task_bodies(app: Any) -> list[dict[str, Any]]:
    return [
        b
        for b in app.state.requests
        if b.get("system") and b["system"][0]["text"].startswith("You are Lomo")
    ]


def _refs(body: dict[str, Any]) -> list[str]:
    """The deferred tools a request loads (tool_reference blocks in its tool results)."""
    return [
        c["tool_name"]
        for m in body["messages"]
        for b in m["content"]
        if b.get("type") == "tool_result" and isinstance(b["content"], list)
        for c in b["content"]
        if c.get("type") == "tool_reference"
    ]


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
                for c in await s.scalars(
                    # In the order they were made: Postgres returns updated rows in any order.
                    select(ToolCall)
                    .where(ToolCall.task_id == run.task_id)
                    .order_by(ToolCall.created_at, ToolCall.call_id)
                )
            }
            outputs = list(
                await s.scalars(select(ToolOutput).order_by(ToolOutput.created_at, ToolOutput.id))
            )
            msgs = {m.id: m for m in await s.scalars(select(MessageRow))}
            segments = list(
                await s.scalars(select(ContextSegment).order_by(ContextSegment.segment))
            )
            # Under another segment size the written summaries cover other steps: unused.
            task = await s.get(Task, run.task_id)
            assert task is not None
        resized = await context_now(
            run.db, task, run.runtime.tools, ContextPolicy(SEGMENT + 1, RECENT)
        )

    assert len(steps) == len(bodies) == STEPS
    prefixes = [st.context["prefix"] for st in steps]
    # 1. The wire: the bytes up to the first breakpoint are the same in every request, and
    # no step changed them without a recorded reason.
    assert len({cached_prefix_until_first_breakpoint(b) for b in bodies}) == 1
    assert unexplained_prefix_changes(bodies, prefixes) == []
    # 2. The stable prefix changed only with a recorded reason; loads, unloads and the
    # profile's addition were appended instead and are recorded as such.
    changes = [c for p in prefixes for c in p["changes"]]
    events = [e for p in prefixes for e in p["events"]]
    assert "unexplained" not in changes and not any("tool definitions" in c for c in changes)
    for prev, now in itertools.pairwise(prefixes):
        assert (now["stable_sha"] != prev["stable_sha"]) == bool(now["changes"]), now
    assert "domain load: documents" in events
    assert "domain load: memory" in events
    assert any(e.startswith("domain unload: ") for e in events), events
    assert any(e.startswith("profile v") and "appended" in e for e in events), events
    assert changes == []  # an added preference rewrites nothing before the history
    # 3. Domain tools: the stable prefix holds only core tools; every domain's tools are
    # deferred (not in the prompt), and a load references them in the conversation.
    deferred = {t["name"] for t in bodies[0]["tools"] if t.get("defer_loading")}
    eager = [t["name"] for t in bodies[0]["tools"] if not t.get("defer_loading")]
    assert "create_document" in deferred and "load_tools" in eager
    assert "create_document" not in eager and _refs(bodies[0]) == []
    assert {
        beta
        for b, beta in zip(run.app.state.requests, run.app.state.betas, strict=True)
        if b in bodies
    } == {"advanced-tool-use-2025-11-20"}
    assert "create_document" in _refs(bodies[2])
    tool_tokens = [p["loaded_tool_tokens"] for p in prefixes]
    assert tool_tokens[0] == 0 < max(tool_tokens)
    # Unloading at a compression boundary: the tool block shrinks again.
    unload = next(i for i, p in enumerate(prefixes) if any("unload" in e for e in p["events"]))
    assert tool_tokens[unload] < tool_tokens[unload - 1]
    assert len(_refs(bodies[unload])) < len(_refs(bodies[unload - 1]))
    # A call to a tool of a domain never loaded ran through its own checks and says so.
    recall = next(c for c in calls.values() if c.name == "recall_memory")
    assert "was not loaded" in (recall.result or {})["visibility"]
    assert "recall_memory" in _refs(bodies[MEMORY_AT + 1])
    assert "recall_memory" not in _refs(bodies[MEMORY_AT])
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
    opening = json.dumps(
        [b.__dict__ for b in resized.request.messages[0].content], ensure_ascii=False
    )
    assert "summary of steps 1–6: turn 1 step 1:" in opening
    assert not any(g.text in opening for g in segments), opening
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
    tokens = {layer["name"]: layer["tokens"] for layer in shown["layers"]}
    assert tokens.pop("loaded_tools") == 0  # unloaded (below)
    # The last step is no turn's first and nothing changed before it: no tail at all.
    assert tokens.pop("dynamic_tail") == 0 and (STEPS - 1) % TURN != 0
    assert all(t > 0 for t in tokens.values()), tokens
    # The task's fixed lines (goal) are in the system prompt of every request, cached; the
    # tail names the turn only at a turn's first step.
    assert all(f"[runtime] goal: {OPENING}" in b["system"][-1]["text"] for b in bodies)
    assert all("cache_control" not in b["system"][-1] for b in bodies)
    tails = [
        next(x["text"] for x in st.context["layers"] if x["name"] == "dynamic_tail") for st in steps
    ]
    for n, tail in enumerate(tails):
        assert ("[runtime] turn" in tail) == (n % TURN == 0), (n, tail)
        assert "goal:" not in tail
    # Both domains went unused for a segment and were unloaded by the last step.
    assert shown["loaded_domains"] == prefixes[-1]["domains"] == []
    assert shown["tool_tokens"]["loaded"] == 0 < shown["tool_tokens"]["core"]
    assert "load_tools" in shown["tools"] and "create_document" not in shown["tools"]
    assert shown["prefix_changes"] == [] and isinstance(shown["prefix_events"], list)
    assert shown["usage"]["cache_read_input_tokens"] > 0
    # 7. The cache, as the API would report it: after the first step most input is read.
    shares = [cached_share(st) for st in steps]
    assert shares[0] == 0.0
    assert sum(shares[1:]) / (STEPS - 1) > 0.8, shares


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
        # The scrubbed goal changed the task's lines in the system prompt: a recorded reason
        # (beside the profile's rewrite: the profile quoted the colour too).
        last = (await run.steps())[-1].context["prefix"]
        assert "task header changed (goal, briefing or language)" in last["changes"], last
        assert "unexplained" not in last["changes"]

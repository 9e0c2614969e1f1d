"""A long task driven step by step through the real runtime activities (`model_step`,
`run_tool`, `summarize_segment`, memory extraction) with the real `anthropic` SDK against
the Messages-API stand-in server, which accounts the prompt cache like the API.

The model is a scripted policy that reads its request like a real model would (handles and
object ids from the tool results and summaries). Between steps the person writes (each turn
opens with a message), edits the storyboard, and states a preference that changes the
profile. Used by tests/test_context_engineering.py and bench/context_cache.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select
from temporalio.testing import ActivityEnvironment

from activities.memory import MemoryActivities
from activities.registry import build_tools
from activities.runtime import RuntimeActivities
from activities.segments import SegmentActivities
from activities.types import SegmentInput, StepInput, ToolInput
from context.build import BuiltContext, build_context
from context.segments import ContextPolicy
from journal.store import StepStore
from journal.types import StepQuery
from llm.anthropic_provider import AnthropicProvider
from llm.types import ModelRequest, ModelResponse, TextBlock, ToolSpec, ToolUseBlock, Usage
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.models import MessageRow, ModelStep, Task, WorkObject
from lomo.ids import new_id
from lomo.settings import Settings
from memory.services import MemoryServices, install_services
from memory.types import ExtractInput
from standin.model import OfflineModel
from standin.server import create_standin_app
from tests.helpers import ThreadServer
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult
from vectors.edge import EdgeVectorIndex
from vectors.embeddings import FakeEmbedder
from workspace.blobs import AssetStore
from workspace.writes import write_object

OPENING = "Plan an autumn campaign for the bakery: a storyboard and a poster series."
BIG_CHARS = 2 * 1024 * 1024


class ExportLog(Tool):
    """A stub tool whose result is 2 MB of JSON (an asset list, a flow's node dump)."""

    spec = ToolSpec(
        name="export_log",
        description="Export the full production log.",
        input_schema={"type": "object", "properties": {}},
    )

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        lines: list[str] = []
        size = 0
        while size < BIG_CHARS:
            lines.append(f"entry {len(lines):06d}: frame rendered, colour check ok")
            size += len(lines[-1])
        return ToolResult("done", {"entries": len(lines), "log": lines})


def _use(n: int, name: str, args: dict[str, Any]) -> ModelResponse:
    return ModelResponse(
        [ToolUseBlock(id=f"toolu_{n:05d}", name=name, input=args)],
        "tool_use",
        Usage(output_tokens=20),
        "policy",
    )


def _text(reply: str) -> ModelResponse:
    return ModelResponse([TextBlock(text=reply)], "end_turn", Usage(output_tokens=10), "policy")


def request_text(request: ModelRequest) -> str:
    return json.dumps([[b.__dict__ for b in m.content] for m in request.messages])


@dataclass
class Policy:
    """The scripted model. `turn_len` steps per turn; the last one replies and ends it."""

    turn_len: int
    page: int
    memory_at: int
    export_at: tuple[int, ...]
    requests: list[ModelRequest] = field(default_factory=list)

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        if request.purpose != "task_step":  # summaries, extraction: the offline stand-in
            return await OfflineModel().complete(request)
        n = len(self.requests)
        self.requests.append(request)
        text = request_text(request)
        handles = re.findall(r"out_[0-9a-z]+", text)
        docs = re.findall(r"obj_[0-9a-z]+", text)  # the storyboard is the first one
        if n == 0:
            return _use(n, "load_tools", {"domain": "documents"})
        if n == 1:
            return _use(n, "create_document", {"name": "storyboard", "text": "Shot 1: bread."})
        if n in self.export_at:
            return _use(n, "export_log", {})
        if n - 1 in self.export_at and handles:  # page 3 of what was just exported
            return _use(n, "read_output", {"handle": handles[-1], "offset": 2 * self.page})
        if n == self.memory_at:  # the memory domain was never loaded: visible != allowed
            return _use(n, "recall_memory", {"query": "brand colour"})
        if n % self.turn_len == self.turn_len - 1:
            return _text(f"Part {n // self.turn_len + 1} is done. Shall I go on?")
        if n % 6 == 1 and handles:  # a slice of the exported log, now and then
            offset = (n * 1500) % 2_000_000
            return _use(n, "read_output", {"handle": handles[-1], "offset": offset, "limit": 1500})
        if n % 2 == 0 and docs:
            return _use(n, "read_object", {"object_id": docs[0]})
        return _use(n, "list_objects", {})


@dataclass
class Run:
    db: Database
    settings: Settings
    user_id: str
    task_id: str
    policy: Policy
    app: Any
    runtime: RuntimeActivities
    segments: SegmentActivities
    memory: MemoryActivities
    token: str
    opening: str = OPENING
    env: ActivityEnvironment = field(default_factory=ActivityEnvironment)

    async def message(self, text: str) -> str:
        mid = new_id("msg")
        async with self.db.session() as s:
            s.add(
                MessageRow(
                    id=mid,
                    user_id=self.user_id,
                    text=text,
                    routing_status="routed",
                    deterministic=True,
                    decision="existing",
                    task_id=self.task_id,
                )
            )
        return mid

    async def person_edits(self) -> None:
        async with self.db.session() as s:
            doc = await s.scalar(select(WorkObject).where(WorkObject.name == "storyboard"))
            assert doc is not None, "the storyboard was never created"
            await write_object(
                s, self.user_id, doc.id, doc.version, {"text": "Shot 1: warm bread."}, "user"
            )

    async def step(self, n: int, extra_messages: list[str] | None = None) -> None:
        turn, step = n // self.policy.turn_len + 1, n % self.policy.turn_len + 1
        texts = list(extra_messages or [])
        if step == 1:
            texts.insert(0, self.opening if n == 0 else f"Go on with part {turn}, please.")
        mids = []
        for text in texts:  # the memory workflow extracts every message of the person
            mid = await self.message(text)
            await self.memory.extract(ExtractInput(self.user_id, mid))
            mids.append(mid)
        decision = await self.env.run(
            self.runtime.model_step, StepInput(self.task_id, turn, step, mids, user_id=self.user_id)
        )
        for c in decision.calls:
            call_id = f"{self.task_id}:{turn}:{step}:{c.index}"
            await self.env.run(self.runtime.run_tool, ToolInput(self.task_id, call_id))
        if decision.segment_closed >= 0:
            await self.env.run(
                self.segments.summarize_segment,
                SegmentInput(self.task_id, decision.segment_closed),
            )

    async def steps(self) -> list[ModelStep]:
        async with self.db.session() as s:
            return list(
                await s.scalars(
                    select(ModelStep)
                    .where(ModelStep.task_id == self.task_id)
                    .order_by(ModelStep.id)
                )
            )


@asynccontextmanager
async def context_run(
    db_url: str,
    tmp: Path,
    policy: Policy,
    min_cache_tokens: int = 0,
    opening: str = OPENING,
    **overrides: Any,
) -> AsyncIterator[Run]:
    settings = Settings(
        data_dir=tmp, database_url=db_url, embedder="fake", model_provider="offline", **overrides
    )
    install_services(settings, MemoryServices(EdgeVectorIndex(tmp / "vectors"), FakeEmbedder(64)))
    db = Database(db_url)
    http = httpx.AsyncClient()
    app = create_standin_app(policy)
    app.state.min_cache_tokens = min_cache_tokens
    with ThreadServer(app) as srv:
        # The deferred-tools path itself is what these tests measure.
        provider = AnthropicProvider(
            api_key="test-key", model="claude-test", base_url=srv.url, deferred_tools=True
        )
        deps = ToolDeps(db=db, http=http, assets=AssetStore(tmp / "assets"), settings=settings)
        tools = build_tools(deps) | {"export_log": ExportLog()}
        async with db.session() as s:
            user, token = await create_user(s, "context-tester")
            task_id = new_id("tsk")
            s.add(
                Task(id=task_id, user_id=user.id, kind="persistent", status="running", goal=opening)
            )
        try:
            yield Run(
                db,
                settings,
                user.id,
                task_id,
                policy,
                app,
                RuntimeActivities(deps, provider, tools),
                SegmentActivities(deps, provider),
                MemoryActivities(deps, provider),
                token,
                opening,
            )
        finally:
            await provider.aclose()
            await http.aclose()
            await db.dispose()


def usage_of(step: ModelStep) -> dict[str, int]:
    u = step.response.get("usage", {})
    return {
        k: int(u.get(k, 0))
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    }


def cached_share(step: ModelStep) -> float:
    u = usage_of(step)
    total = u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
    return u["cache_read_input_tokens"] / total if total else 0.0


def cached_prefix_until_first_breakpoint(body: dict[str, Any]) -> str:
    """The bytes the API caches up to the request's first breakpoint, in its order (eager
    tools, system, messages; deferred tools are not in the prompt), plus the deferred tool
    list (a tool_reference expands from it, so it must not change either)."""
    parts: list[Any] = []
    for t in body.get("tools") or []:
        if t.get("defer_loading"):
            continue
        parts.append(t)
        if "cache_control" in t:
            break
    else:
        for b in body.get("system") or []:
            parts.append(b)
            if "cache_control" in b:
                break
        else:
            raise AssertionError("no breakpoint in the tools or the system prompt")
    deferred = [t for t in body.get("tools") or [] if t.get("defer_loading")]
    return json.dumps([parts, deferred], sort_keys=True)


def unexplained_prefix_changes(
    bodies: list[dict[str, Any]], prefixes: list[dict[str, Any]]
) -> list[int]:
    """The steps whose bytes up to the first breakpoint differ from the step before on the
    wire without a recorded reason (a profile rewrite, new tool definitions), and those
    whose record says "unexplained"."""
    out = []
    for i in range(1, len(bodies)):
        changed = cached_prefix_until_first_breakpoint(
            bodies[i]
        ) != cached_prefix_until_first_breakpoint(bodies[i - 1])
        reasons = [c for c in prefixes[i].get("changes", []) if c != "unexplained"]
        if (changed and not reasons) or "unexplained" in prefixes[i].get("changes", []):
            out.append(i)
    return out


async def context_now(
    db: Database, task: Task, tools: dict[str, Tool], policy: ContextPolicy
) -> BuiltContext:
    """The context a next step of `task` would be built on, under `policy`."""
    loaded = await StepStore(db, policy).load_step(
        StepQuery(task.id, task.user_id, task.turn + 1, 1, [])
    )
    return build_context(loaded.data, tools, policy)

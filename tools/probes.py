"""Probe tools for fault-injection tests (registered only with `LOMO_TEST_TOOLS=1`).

Each execution appends a line to `{data_dir}/probes/executions.jsonl` and announces its
start with a marker file, so a test can SIGKILL the worker while the call is in flight.
`probe_idempotent` keeps one result per call_id (a retry with the same key returns it);
`probe_once` is non-idempotent: its retry must never reach it (run_tool answers
`outcome_unknown`).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from llm.types import ToolSpec
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult

_SCHEMA = {
    "type": "object",
    "properties": {"hold_s": {"type": "number"}, "label": {"type": "string"}},
}


class _Probe(Tool):
    def __init__(self, deps: ToolDeps) -> None:
        self.dir = Path(deps.settings.data_dir) / "probes"

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        self.dir.mkdir(parents=True, exist_ok=True)
        with (self.dir / "executions.jsonl").open("a") as f:
            f.write(json.dumps({"tool": self.name, "call_id": ctx.call_id, "pid": os.getpid()}))
            f.write("\n")
        marker = self.dir / f"started-{self.name}-{os.getpid()}"
        marker.write_text(ctx.call_id)
        # Hold only on the first execution of a call, so the test can kill us mid-call.
        if not (self.dir / f"held-{ctx.call_id}").exists():
            (self.dir / f"held-{ctx.call_id}").write_text("1")
            await asyncio.sleep(float(args.get("hold_s", 0)))
        result_file = self.dir / f"result-{ctx.call_id.replace(':', '_')}.json"
        if not result_file.exists():
            result_file.write_text(json.dumps({"label": args.get("label", ""), "pid": os.getpid()}))
        return ToolResult("done", json.loads(result_file.read_text()), made_progress=True)


class ProbeIdempotent(_Probe):
    spec = ToolSpec("probe_idempotent", "Test probe (idempotent).", _SCHEMA)
    idempotent = True


class ProbeOnce(_Probe):
    spec = ToolSpec("probe_once", "Test probe (not idempotent).", _SCHEMA)
    idempotent = False


def probe_tools(deps: ToolDeps) -> list[Tool]:
    return [ProbeIdempotent(deps), ProbeOnce(deps)] if deps.settings.test_tools else []

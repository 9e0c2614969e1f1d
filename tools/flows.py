"""The agent's flow tool (domain `flows`): run a flow object as a durable DAG.

The tool only opens the run (checks the graph, records the owning task); the task
workflow starts `FlowRunWorkflow` as a child when the outcome names a run to start
(activities start no workflows). The run's progress reaches the task's context through
`flows.runs.progress_lines`; the task is woken when the run ends or needs the person.
"""

from __future__ import annotations

from typing import Any

from flows import runs
from flows.errors import FlowError
from llm.types import ToolSpec
from lomo.errors import Conflict, InvalidInput, NotFound
from lomo.states import FlowRunStatus
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult, error

START = "_start_flow_run"  # journal field the runtime turns into ToolOutcome.flow_run


class RunFlow(Tool):
    domain = "flows"
    idempotent = True  # a second call finds the run the first one opened
    spec = ToolSpec(
        name="run_flow",
        description="Run a flow object: its nodes execute in dependency order, paid nodes "
        "after one price card for the total if needed. Unchanged nodes reuse their earlier "
        "results at no cost. Progress appears in your context; you are woken when the run "
        "ends or needs the person.",
        input_schema={
            "type": "object",
            "properties": {"object_id": {"type": "string", "description": "the flow (obj_…)"}},
            "required": ["object_id"],
        },
    )

    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        flow_id = str(args.get("object_id") or "")
        try:
            async with self.deps.db.session() as s:
                run = await runs.open_run(s, ctx.user_id, flow_id, ctx.task_id)
                run_id, status = run.id, run.status
        except (FlowError, NotFound, InvalidInput) as e:
            return error(e.detail, code=e.code)
        except Conflict as e:
            run_id = str(e.extra.get("run_id"))
            async with self.deps.db.session() as s:
                status = (await runs.get_run(s, ctx.user_id, run_id)).status
            if status != FlowRunStatus.PLANNING:  # running already: report it, start nothing
                return ToolResult(
                    "done", {"status": "already_running", "run_id": run_id, "flow_id": flow_id}
                )
        # A run still `planning` may be ours from an attempt that died before the
        # workflow started: starting it again is harmless (the id is the run's).
        return ToolResult(
            "done",
            {"status": "started", "run_id": run_id, "flow_id": flow_id, START: run_id},
            made_progress=True,
        )


def flow_tools(deps: ToolDeps) -> list[Tool]:
    return [RunFlow(deps)]

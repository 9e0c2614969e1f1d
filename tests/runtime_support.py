"""Plumbing for runtime tests: tasks started straight on the workflow, workers as real
processes (so they can be SIGKILLed), and a scripted model behind the Messages-API stand-in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import update
from temporalio.client import Client, WorkflowHandle

from llm.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock, Usage
from lomo import clock
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.models import MessageRow, Task
from lomo.ids import new_id
from workflows.task import TaskWorkflow
from workflows.types import TaskInput

ROOT = Path(__file__).resolve().parent.parent


async def new_user(db: Database) -> str:
    async with db.session() as s:
        user, _ = await create_user(s, "runtime-tester")
        return user.id


async def add_message(db: Database, user_id: str, task_id: str, text: str) -> str:
    async with db.session() as s:
        mid = new_id("msg")
        s.add(
            MessageRow(
                id=mid,
                user_id=user_id,
                text=text,
                routing_status="routed",
                deterministic=True,
                decision="existing",
                task_id=task_id,
            )
        )
        return mid


async def start_task(
    client: Client,
    db: Database,
    task_queue: str,
    user_id: str,
    text: str,
    kind: str = "lightweight",
    **limits: Any,
) -> tuple[str, WorkflowHandle[Any, Any]]:
    task_id = new_id("tsk")
    async with db.session() as s:
        s.add(Task(id=task_id, user_id=user_id, kind=kind, status="running", goal=text))
    mid = await add_message(db, user_id, task_id, text)
    handle = await client.start_workflow(
        TaskWorkflow.run,
        TaskInput(task_id, user_id, kind, mid, **limits),
        id=f"task:{task_id}",
        task_queue=task_queue,
    )
    # The workflow has the message: the mark the api writes after a hand-off, so the
    # api's relay does not hand it over (and announce it) again half a minute later.
    async with db.session() as s:
        await s.execute(
            update(MessageRow).where(MessageRow.id == mid).values(handed_at=clock.now())
        )
    return task_id, handle


def worker_env(
    tmp: Path, db_url: str, temporal: str, task_queue: str, **extra: str
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOMO_")}
    env.update(
        LOMO_DATA_DIR=str(tmp),
        LOMO_DATABASE_URL=db_url,
        LOMO_TEMPORAL_ADDRESS=temporal,
        LOMO_TASK_QUEUE=task_queue,
        **extra,
    )
    return env


def spawn_worker(
    env: dict[str, str], log: Path, command: tuple[str, ...] = ("cli.main", "worker")
) -> subprocess.Popen[bytes]:
    """A worker process; `command` is the module (and arguments) run with `python -m`."""
    out = log.open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", *command],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=out,
        start_new_session=True,
    )


def kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def standin_worker_env(
    tmp: Path, db_url: str, temporal: str, task_queue: str, model_url: str, **extra: str
) -> dict[str, str]:
    """A worker process whose model is the real Anthropic SDK against a local stand-in."""
    return worker_env(
        tmp,
        db_url,
        temporal,
        task_queue,
        LOMO_MODEL_PROVIDER="anthropic",
        ANTHROPIC_API_KEY="test-key",
        LOMO_ANTHROPIC_BASE_URL=model_url,
        **extra,
    )


class Workers:
    """Worker processes of one kill test: each `spawn` starts one (logs in `tmp`), and
    leaving the block SIGKILLs whatever still runs, so no test leaks a worker."""

    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.env, self.tmp = env, tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def spawn(
        self, name: str, command: tuple[str, ...] = ("cli.main", "worker"), **overrides: str
    ) -> subprocess.Popen[bytes]:
        proc = spawn_worker({**self.env, **overrides}, self.tmp / f"{name}.log", command)
        self.procs.append(proc)
        return proc

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            kill(proc)


def call_then_report(tool: str, args: dict[str, Any], uid: str, prefix: str) -> CountingResponder:
    """The model of the kill tests: one tool call, then a reply quoting its result."""

    def answer(request: ModelRequest, n: int) -> ModelResponse:
        results = last_tool_results(request)
        if not results:
            return tool_use(tool, args, uid)
        return text(prefix + results[0])

    return CountingResponder(answer)


def tool_use(name: str, args: dict[str, Any], uid: str) -> ModelResponse:
    return ModelResponse(
        content=[ToolUseBlock(id=uid, name=name, input=args)],
        stop_reason="tool_use",
        usage=Usage(input_tokens=10, output_tokens=5),
    )


def text(reply: str) -> ModelResponse:
    return ModelResponse(
        content=[TextBlock(text=reply)],
        stop_reason="end_turn",
        usage=Usage(input_tokens=10, output_tokens=5),
    )


def last_tool_results(request: ModelRequest) -> list[str]:
    """The results of the model's latest calls. A domain tool called while its domain was
    not loaded is followed by the runtime's own load (a result carrying only tool
    references, or with plain tool lists the note "Loaded tools: ..."), so the latest
    results are not always in the last message."""
    from llm.types import ToolResultBlock

    def own_load(b: ToolResultBlock) -> bool:
        return bool(b.tool_refs) or b.content.startswith("Loaded tools: ")

    for m in reversed(request.messages):
        found = [b.content for b in m.content if isinstance(b, ToolResultBlock) and not own_load(b)]
        if found:
            return found
    return []


class CountingResponder:
    """A scripted model for the stand-in server: `script(request, n)` answers the n-th
    request (0-based); every request is kept so a test can count calls per step."""

    def __init__(self, script: Callable[[ModelRequest, int], ModelResponse]) -> None:
        self.script = script
        self.requests: list[ModelRequest] = []

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if request.purpose != "task_step":  # background memory extraction, routing
            from standin.model import OfflineModel

            return await OfflineModel().complete(request)
        return self.script(request, len(self.requests) - 1)


HISTORIES = ROOT / "tests" / "histories"


async def replay_and_maybe_record(client: Client, workflow_id: str, name: str) -> int:
    """Replay every run of a workflow (continue-as-new makes several) against the current
    workflow code; with LOMO_RECORD_HISTORIES=1 also store them in tests/histories/ for
    test_replay.py. Returns the largest run's size in bytes."""
    from temporalio.worker import Replayer

    from cli.worker import WORKFLOWS

    runs = [r async for r in client.list_workflows(f'WorkflowId = "{workflow_id}"')]
    runs.sort(key=lambda r: r.start_time)
    assert runs, f"no runs of {workflow_id}"
    largest = 0
    for n, run in enumerate(runs):
        history = await client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history()
        await Replayer(workflows=WORKFLOWS).replay_workflow(history)
        text = history.to_json()
        largest = max(largest, len(text))
        if os.environ.get("LOMO_RECORD_HISTORIES") == "1":
            suffix = f"_run{n + 1}" if len(runs) > 1 else ""
            (HISTORIES / f"{name}{suffix}.json").write_text(text)
    return largest

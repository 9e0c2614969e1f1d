"""The contract between the runtime and every tool the model can call.

A tool is a small object with a spec (what the model sees), a domain (which tool set loads
it), whether it is idempotent, and `run`. The runtime's `run_tool` activity journals each
call under its `call_id` (the business idempotency key) and dispatches to the tool; tools
never retry by themselves (Temporal owns retries) and never see workflow state.

Tool sets live in `tools/`, a module per area (checklist, context, generation, workspace,
memory, flows, probes); `activities/registry.py` assembles them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from llm.types import ToolSpec
from lomo.db.engine import Database
from lomo.settings import Settings
from workspace.store import BlobStore

ToolStatus = Literal["done", "error", "outcome_unknown", "needs_confirmation", "needs_credit"]


@dataclass
class ToolDeps:
    """Clients shared by every tool of one worker (built once, passed in)."""

    db: Database
    http: httpx.AsyncClient
    assets: BlobStore
    settings: Settings


@dataclass
class ToolCallContext:
    task_id: str
    user_id: str
    call_id: str  # {task_id}:{turn}:{step}:{index}: the idempotency key of any side effect
    turn: int
    step: int
    index: int


@dataclass
class ToolResult:
    status: ToolStatus
    # What the model sees as the tool result: small JSON. A large output is stored in
    # tool_outputs by the runtime and replaced by a summary plus a handle.
    result: dict[str, Any]
    order_id: str | None = None  # a generation job the task must await
    card_id: str | None = None  # a card the task must wait on (price, confirm, delete)
    made_progress: bool = False  # a new artifact, a step done, a job submitted
    artifacts: list[str] = field(default_factory=list)  # object ids produced or changed


class Tool(ABC):
    spec: ToolSpec
    # core (always visible) or the domain that `load_tools` makes visible: image | video |
    # audio | 3d | documents | flows | memory | budget (`DOMAINS` in context/tools.py).
    domain: str = "core"
    inline_output: bool = False  # True: never kept outside the context (bounded results)
    # Idempotent tools run again with the same call_id after a crash; non-idempotent ones
    # answer `outcome_unknown` when they find their own call started without a result.
    idempotent: bool = True

    @property
    def name(self) -> str:
        return self.spec.name

    @abstractmethod
    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult: ...


def error(detail: str, **extra: Any) -> ToolResult:
    """A refused call: the model hears why; nothing was done."""
    return ToolResult("error", {"error": detail, **extra})

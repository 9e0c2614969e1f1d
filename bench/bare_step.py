"""The bare Temporal side of bench/agent_step.py: an update whose handler waits until the
workflow ran the model activity and the tool activity (and, with two inferences, the
model again), returning the reply. No DB, no journal: the least a Temporal user writes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow


@dataclass
class BareDecision:
    tool: str
    reply: str


@activity.defn(name="bare_model")
async def bare_model(text: str) -> BareDecision:
    return BareDecision("lookup", "Looking it up")


@activity.defn(name="bare_tool")
async def bare_tool(d: BareDecision) -> str:
    return "42"


@workflow.defn(name="BareStep")
class BareStep:
    def __init__(self) -> None:
        self.inbox: list[str] = []
        self.replies: dict[str, str] = {}
        self.inferences = 1

    @workflow.run
    async def run(self, inferences: int) -> None:
        self.inferences = inferences
        opts: dict[str, Any] = {"start_to_close_timeout": timedelta(minutes=1)}
        while True:
            await workflow.wait_condition(lambda: bool(self.inbox))
            text = self.inbox.pop(0)
            d = await workflow.execute_activity(bare_model, text, **opts)
            result = await workflow.execute_activity(bare_tool, d, **opts)
            if self.inferences == 2:
                d = await workflow.execute_activity(bare_model, result, **opts)
            self.replies[text] = f"{d.reply}: {result}"

    @workflow.update
    async def message(self, text: str) -> str:
        self.inbox.append(text)
        await workflow.wait_condition(lambda: text in self.replies)
        return self.replies.pop(text)

"""The workflows as a versioned worker registers them (Worker Versioning, docs/operations.md).

Each says how its runs move between worker builds. A task or flow run is pinned: it
finishes on the build it started on, so a changed workflow never meets an older history.
The main thread, memory and nudge workflows never end: they move to the current build at their
next workflow task, so their changes must replay (tests/test_replay.py guards that).

The SDK refuses a versioning behavior on an unversioned worker, so the behaviors live on
these subclasses, which only a versioned worker registers; the code is the parents'.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from lomo.contracts.flow_run import FlowRunInput
    from lomo.contracts.main_thread import MainThreadInput
    from lomo.contracts.nudge import NudgeInput
    from lomo.contracts.task import TaskInput
    from memory.types import MemoryInput

# The parents' modules, which the worker passes through the sandbox (cli/worker.py).
from workflows.flow_run import FlowRunWorkflow
from workflows.main_thread import MainThreadWorkflow
from workflows.memory import MemoryWorkflow
from workflows.nudge import NudgeWorkflow
from workflows.task import TaskWorkflow

PINNED = VersioningBehavior.PINNED
AUTO_UPGRADE = VersioningBehavior.AUTO_UPGRADE


@workflow.defn(name="TaskWorkflow", versioning_behavior=PINNED)
class PinnedTaskWorkflow(TaskWorkflow):
    @workflow.run
    async def run(self, inp: TaskInput) -> str:
        return await super().run(inp)


@workflow.defn(name="FlowRunWorkflow", versioning_behavior=PINNED)
class PinnedFlowRunWorkflow(FlowRunWorkflow):
    @workflow.run
    async def run(self, inp: FlowRunInput) -> str:
        return await super().run(inp)


@workflow.defn(name="MainThreadWorkflow", versioning_behavior=AUTO_UPGRADE)
class UpgradingMainThreadWorkflow(MainThreadWorkflow):
    @workflow.run
    async def run(self, inp: MainThreadInput) -> None:
        await super().run(inp)


@workflow.defn(name="MemoryWorkflow", versioning_behavior=AUTO_UPGRADE)
class UpgradingMemoryWorkflow(MemoryWorkflow):
    @workflow.run
    async def run(self, inp: MemoryInput) -> None:
        await super().run(inp)


@workflow.defn(name="NudgeWorkflow", versioning_behavior=AUTO_UPGRADE)
class UpgradingNudgeWorkflow(NudgeWorkflow):
    @workflow.run
    async def run(self, inp: NudgeInput) -> None:
        await super().run(inp)


VERSIONED = [
    PinnedTaskWorkflow,
    PinnedFlowRunWorkflow,
    UpgradingMainThreadWorkflow,
    UpgradingMemoryWorkflow,
    UpgradingNudgeWorkflow,
]

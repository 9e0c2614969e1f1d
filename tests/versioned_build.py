"""A second worker build for tests/test_worker_versioning.py: the same worker, but its
TaskWorkflow starts with a timer the first build never set. Replaying a first-build
history on it fails (nondeterminism), so a task that reached this build by mistake would
be stuck; one that stays pinned to its own build finishes.

    LOMO_WORKER_BUILD_ID=b python -m tests.versioned_build
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from workflows.types import TaskInput

from workflows.task import TaskWorkflow


@workflow.defn(name="TaskWorkflow", versioning_behavior=VersioningBehavior.PINNED)
class ChangedTaskWorkflow(TaskWorkflow):
    @workflow.run
    async def run(self, inp: TaskInput) -> str:
        await workflow.sleep(timedelta(milliseconds=1))
        return await super().run(inp)


def _serve() -> None:
    # The worker's own imports stay out of the module the sandbox loads for each run.
    from cli.worker import main
    from lomo.install import with_install_secrets
    from lomo.settings import get_settings
    from workflows.versioned import VERSIONED, PinnedTaskWorkflow

    changed = [ChangedTaskWorkflow if w is PinnedTaskWorkflow else w for w in VERSIONED]
    main(with_install_secrets(get_settings()), changed)


if __name__ == "__main__":
    _serve()

"""The bare side of bench/parked_tasks.py: a workflow parked on a signal, and its worker.

    python bench/bare_parked.py ADDRESS TASK_QUEUE

`BareParked` is the least a Temporal user writes for a task that waits: it starts, then
waits on one signal. Its worker runs with the SDK's defaults (sandbox on, cache 1,000),
as Lomo's does, so their memory per cached workflow compares like for like.
"""

from __future__ import annotations

import asyncio
import sys

from temporalio import workflow


@workflow.defn(name="BareParked")
class BareParked:
    def __init__(self) -> None:
        self._done = False

    @workflow.run
    async def run(self, goal: str) -> str:
        await workflow.wait_condition(lambda: self._done)
        return goal

    @workflow.signal
    def finish(self) -> None:
        self._done = True


async def _serve(address: str, queue: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    client = await Client.connect(address)
    await Worker(client, task_queue=queue, workflows=[BareParked]).run()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], sys.argv[2]))

"""Bench instrumentation: the stand-in model's CPU, per process (bench/task_cost.py).

bench/task_cost.py puts this folder on PYTHONPATH of the stack it starts and sets
BENCH_MODEL_CPU_DIR. Each Python process of that stack then wraps
`OfflineModel.complete` with `time.thread_time()`, and keeps the running total of the
model's CPU seconds in `<dir>/<pid>` (one pwrite per call: the file always holds the
latest total). `complete` computes its answer without awaiting anything, so the thread's
CPU between its start and its end is the model's alone. Without the variable this does
nothing.
"""

from __future__ import annotations

import os
import time
from typing import Any


def _install(folder: str) -> None:
    from standin.model import OfflineModel

    fd = os.open(os.path.join(folder, str(os.getpid())), os.O_WRONLY | os.O_CREAT, 0o644)
    inner = OfflineModel.complete
    spent = [0.0]

    async def complete(self: OfflineModel, request: Any) -> Any:
        t0 = time.thread_time()
        try:
            return await inner(self, request)
        finally:
            spent[0] += time.thread_time() - t0
            os.pwrite(fd, f"{spent[0]:.6f}".encode().ljust(32), 0)

    OfflineModel.complete = complete  # type: ignore[method-assign]


if _dir := os.environ.get("BENCH_MODEL_CPU_DIR"):
    _install(_dir)

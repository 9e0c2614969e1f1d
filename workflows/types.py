"""The workflows' own inputs and the payloads between the api and the workflows, as the
contracts in lomo/contracts/ define them; named here for the code that starts workflows
from this side (tests, benchmarks)."""

from __future__ import annotations

from lomo.contracts.main_thread import MainThreadInput
from lomo.contracts.task import (
    FlowEvent,
    GenerationEvent,
    InboxEntry,
    ResumeInput,
    TaskInput,
)

__all__ = [
    "FlowEvent",
    "GenerationEvent",
    "InboxEntry",
    "MainThreadInput",
    "ResumeInput",
    "TaskInput",
]

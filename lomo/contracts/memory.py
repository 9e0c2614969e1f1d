"""MemoryWorkflow's contract (workflows/memory.py): one per person, id `memory:{user_id}`.
Its input and the corrections' output are the memory room's data (memory/types.py:
`MemoryInput`, `CorrectOutput`)."""

from __future__ import annotations

WORKFLOW = "MemoryWorkflow"

# Signals: a message id to extract from; a confirmed forget card's id.
EXTRACT = "extract"
FORGET = "forget"
# Updates: the forget card's id, answered once the forget ran (str); a correction's
# evidence id, answered with a CorrectOutput.
FORGET_AND_WAIT = "forget_and_wait"
CORRECT = "correct"


def workflow_id(user_id: str) -> str:
    return f"memory:{user_id}"

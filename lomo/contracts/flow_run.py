"""FlowRunWorkflow's contract (workflows/flow_run.py): one per flow run, id
`flowrun:{run_id}`; started by the api or by a task, woken by its jobs and price cards."""

from __future__ import annotations

from dataclasses import dataclass, field

WORKFLOW = "FlowRunWorkflow"

# Signals: a node's job ended (lomo.contracts.task.GenerationEvent); a card id answered.
NODE_EVENT = "node_event"
CARD_ANSWERED = "card_answered"
# Query: FlowRunView.
STATE = "state"


def workflow_id(run_id: str) -> str:
    return f"flowrun:{run_id}"


@dataclass
class FlowRunInput:
    """The run to plan or re-read (the flow activities' `plan_flow_run`,
    `refresh_flow_run`); also the input the workflow itself is started with."""

    run_id: str
    attempt: int = 1
    # The owning task was told the run needs the person: carried across continue-as-new,
    # so a run that rolls over while its price card waits does not ask again.
    asked: bool = False


@dataclass
class FlowRunView:
    """The `state` query's answer: the run's status, the flow version it runs, and each
    node's status."""

    status: str
    version: int
    nodes: dict[str, str] = field(default_factory=dict)

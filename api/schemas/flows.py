"""Flow runs: a run of a flow object, its progress and its nodes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from api.schemas.common import Price


class NodeView(BaseModel):
    status: Literal["pending", "running", "done", "reused", "failed", "blocked", "removed"]
    hash: str | None = Field(description="content hash the node ran (or was reused) under")
    version: int | None = Field(description="the flow version the node ran on")
    order_id: str | None
    object_id: str | None = Field(description="the node's result (an asset or document)")
    error: str | None
    stale: bool = Field(description="the node's definition (or an input) changed after it ran")


class Progress(BaseModel):
    total: int
    done: int = Field(description="finished nodes, reused ones included")
    reused: int
    running: int
    failed: int
    blocked: int = Field(description="not run because an input failed")


class RunView(BaseModel):
    run_id: str
    flow_id: str
    task_id: str | None
    status: Literal["planning", "waiting_price", "running", "succeeded", "failed", "declined"]
    reason: str = Field(description="why it failed or was declined (each failed node)")
    attempt: int
    version: int
    price: Price
    card_id: str | None = Field(description="the run's price card, if one was asked")
    progress: Progress
    nodes: dict[str, NodeView]
    created_at: str | None
    ended_at: str | None


class RunList(BaseModel):
    runs: list[RunView]
    next: str | None = Field(
        default=None, description="the cursor of the next page; null on the last page"
    )


class RunIn(BaseModel):
    # The task that owns the run (its orders, its price card, its progress line); default:
    # the task that made or last read the flow. Paid nodes need one.
    task_id: str | None = Field(default=None, min_length=1, max_length=40)

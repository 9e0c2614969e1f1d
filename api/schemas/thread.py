"""The person's timeline: a view over the event log."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ThreadItem(BaseModel):
    """One event; its data's fields follow `seq`, `type` and `at`."""

    model_config = ConfigDict(extra="allow")
    seq: int
    type: str = Field(
        description="message.received, task.reply, task.created, task.status or card.created"
    )
    at: str
    text: str | None = Field(default=None, description="what the person said, or the task replied")


class Thread(BaseModel):
    items: list[ThreadItem]
    next: int | None = Field(
        default=None, description="the `after` of the next page; null on the last page"
    )

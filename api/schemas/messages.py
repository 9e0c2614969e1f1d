"""A person's message in, its routing record out."""

from __future__ import annotations

from pydantic import BaseModel, Field


class MessageIn(BaseModel):
    text: str = Field(min_length=1)
    client_message_id: str | None = Field(default=None, max_length=200)
    task_id: str | None = Field(default=None, max_length=40)
    card_id: str | None = Field(default=None, max_length=40)
    object_id: str | None = Field(default=None, max_length=40)
    attachments: list[str] = Field(default_factory=list, max_length=50)


class TaskMessageIn(BaseModel):
    text: str = Field(min_length=1)
    client_message_id: str | None = Field(default=None, max_length=200)


class Routing(BaseModel):
    status: str = Field(description="pending until the main thread routed it, then routed")
    deterministic: bool = Field(description="settled by an explicit target, no model call")
    decision: str | None = Field(default=None, description="absent until decided")
    task_id: str | None = Field(default=None, description="absent until routed to a task")


class Processed(BaseModel):
    task_id: str | None
    turn: int
    step: int | None


class MessageAccepted(BaseModel):
    message_id: str
    routing: Routing


class MessageView(BaseModel):
    message_id: str
    text: str
    routing: Routing
    processed: Processed | None = Field(default=None, description="absent until its task read it")

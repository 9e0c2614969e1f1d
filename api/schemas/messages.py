"""A person's message in, its routing record out."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

# An id is never empty: "" is refused (422), not read as "none" in one place and stored
# as a value in another (two messages with "" as client id collided).
Id = Annotated[str, Field(min_length=1, max_length=40)]


class MessageIn(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"text": "A red tabby cat"}]})
    text: str = Field(min_length=1)
    client_message_id: str | None = Field(default=None, min_length=1, max_length=200)
    task_id: Id | None = None
    card_id: Id | None = None
    object_id: Id | None = None
    attachments: list[Id] = Field(default_factory=list, max_length=50)


class TaskMessageIn(BaseModel):
    text: str = Field(min_length=1)
    client_message_id: str | None = Field(default=None, min_length=1, max_length=200)


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


class MovedTo(BaseModel):
    message_id: str = Field(description="the message as the other task received it")
    task_id: str | None


MESSAGE_STATES = (
    "sent, received (its task's workflow has it), read (taken into a model step), "
    "withdrawn or moved"
)


class MessageView(BaseModel):
    message_id: str
    text: str
    routing: Routing
    processed: Processed | None = Field(default=None, description="absent until its task read it")
    state: str = Field(description=MESSAGE_STATES)
    task_id: str | None = Field(default=None, description="its task; absent until routed")
    withdrawn: bool | None = Field(default=None, description="present (true) once withdrawn")
    moved_to: MovedTo | None = Field(default=None, description="present once moved away")
    moved_from: str | None = Field(default=None, description="the message it was moved from")


class MoveIn(BaseModel):
    task_id: str = Field(min_length=1, max_length=40)


class MessageList(BaseModel):
    messages: list[MessageView]

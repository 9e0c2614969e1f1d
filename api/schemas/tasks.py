"""Tasks: their state, checklist, cards, and the context of their last model call."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.cards import CardView


class ResumeIn(BaseModel):
    """Optional raised limits for a task the runtime stopped at a limit."""

    max_steps_per_turn: int | None = Field(default=None, ge=1, le=1000)
    max_turns_without_progress: int | None = Field(default=None, ge=1, le=1000)


class ChecklistItemView(BaseModel):
    id: str
    title: str
    status: str = Field(description="open, in_progress, done, blocked or skipped")
    requires_confirmation: bool
    artifacts: list[Any]
    note: str


class TaskView(BaseModel):
    task_id: str
    kind: str = Field(description="persistent or lightweight")
    status: str
    status_reason: str
    goal: str
    summary: str
    language: str
    turn: int
    checklist: list[ChecklistItemView]
    cards: list[CardView]
    waiting_on: list[Any]
    artifacts: list[str] = Field(description="ids of the objects the task made")
    created_at: str
    updated_at: str


class TaskList(BaseModel):
    tasks: list[TaskView]
    next: str | None = Field(
        default=None, description="the cursor of the next page; null on the last page"
    )


class ShownImage(BaseModel):
    object_id: str
    version: int
    media_type: str
    width: int
    height: int


class ContextLayer(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    text: str
    tokens: int
    cached: bool | str = Field(
        description="true: the same bytes as the step before (the prompt cache serves "
        'them); "partly": the history up to that step'
    )
    images: list[ShownImage] = Field(
        default_factory=list, description="the pictures the model was shown in this layer"
    )


class ToolTokens(BaseModel):
    core: int
    loaded: int


class LoadedGuide(BaseModel):
    name: str
    tokens: int = Field(description="the guide's text, estimated like the layers' tokens")


class ContextView(BaseModel):
    layers: list[ContextLayer]
    tools: list[str]
    total_tokens: int
    turn: int
    step: int
    loaded_domains: list[str]
    loaded_guides: list[LoadedGuide] = Field(
        default_factory=list,
        description="creative guides in the history after the stable prefix, in load order",
    )
    tool_tokens: ToolTokens
    prefix_changes: list[str]
    prefix_events: list[str] = Field(
        description="appended without touching the prefix: domain and guide loads and "
        "unloads, profile additions"
    )
    usage: dict[str, Any] = Field(
        description="what the model provider reported for that request (prompt-cache "
        "reads and writes)"
    )

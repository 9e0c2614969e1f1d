"""The person's memories: versions, their sources, the profile."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ForgetIn(BaseModel):
    memory_id: str | None = Field(default=None, min_length=1, max_length=40)
    text: str | None = Field(default=None, max_length=2000)


class CorrectIn(BaseModel):
    content: str = Field(min_length=1, max_length=2000)


class Source(BaseModel):
    evidence_id: str
    relation: str
    source: str = Field(description="message, edit or correction")
    message_id: str | None
    usable: bool


class MemoryVersionView(BaseModel):
    memory_id: str
    kind: str = Field(description="stated or inferred")
    scope: str = Field(description="profile, project or task")
    task_id: str | None
    subject: str
    attribute: str
    content: str
    version: int
    version_id: str
    relation: str
    status: str
    sources: list[Source]
    valid_from: str
    valid_to: str | None = Field(default=None, description="absent while it holds")


class MemoryList(BaseModel):
    memories: list[MemoryVersionView]
    next: str | None = Field(
        default=None, description="the cursor of the next page; null on the last page"
    )


class MemoryHistory(BaseModel):
    memory_id: str
    status: str
    current_version: int
    versions: list[MemoryVersionView]
    next: str | None = Field(
        default=None, description="the cursor of the next page; null on the last page"
    )


class Profile(BaseModel):
    version: int = Field(description="0 before the first profile")
    items: list[Any]
    created_at: str | None = Field(default=None, description="absent before the first")

"""Workspace objects (documents, flows, assets) and their versions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from api.schemas.common import MAX_DB_INT


class ObjectIn(BaseModel):
    type: Literal["document", "flow", "asset"]
    name: str = Field(min_length=1, max_length=300)
    # documents {"text"}; flows {"nodes"}; assets {"media_type", "data_base64", ...}
    content: dict[str, Any]


class WriteIn(BaseModel):
    base_version: int = Field(ge=1, le=MAX_DB_INT)
    content: dict[str, Any]


class EditIn(BaseModel):
    base_version: int | None = Field(default=None, ge=1, le=MAX_DB_INT)
    edits: list[dict[str, Any]] | None = None  # documents
    nodes: dict[str, dict[str, Any] | None] | None = None  # flows


class ObjectSummary(BaseModel):
    object_id: str
    type: str
    name: str
    version: int
    media_type: str | None = Field(
        default=None, description="an asset's current type, in lists (e.g. model/gltf-binary)"
    )


class ObjectList(BaseModel):
    objects: list[ObjectSummary]
    next: str | None = Field(
        default=None, description="the cursor of the next page; null on the last page"
    )


class ObjectView(BaseModel):
    object_id: str
    type: str
    name: str
    version: int = Field(description="the version shown")
    current_version: int
    content: dict[str, Any]
    created_by: str = Field(description='"user" or "task:{id}:{call_id}"')
    created_at: str
    task_ids: list[str]


class VersionEntry(BaseModel):
    version: int
    created_by: str
    created_at: str
    summary: str = Field(description="what changed against the previous version")
    task_id: str | None = Field(default=None, description="the task that made it, if any")
    task_goal: str | None = Field(
        default=None, description="that task's goal: the agent's version named by its work"
    )


class VersionList(BaseModel):
    object_id: str
    versions: list[VersionEntry]
    next: str | None = Field(
        default=None, description="the cursor of the next page; null on the last page"
    )


class Written(BaseModel):
    object_id: str
    type: str
    name: str
    version: int
    base_version: int
    summary: str
    others_changed: list[str] | None = Field(
        default=None, description="flows only: nodes other writers changed meanwhile"
    )


class DiffLine(BaseModel):
    op: Literal["equal", "removed", "added"]
    text: str
    old_line: int | None = Field(description="its number in the `from` version (1-based)")
    new_line: int | None = Field(description="its number in the `to` version (1-based)")


class ObjectDiff(BaseModel):
    object_id: str
    type: str
    from_version: int
    to_version: int
    added: int = Field(description="lines added in all")
    removed: int = Field(description="lines removed in all")
    hunks: list[list[DiffLine]] = Field(
        description="the changed lines with a few unchanged ones around them"
    )
    truncated: bool = Field(description="true when more lines changed than are shown")

"""Workflow and activity data of the memory service: ids and small values only."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class MemoryJob:
    kind: str  # extract | forget | correct
    ref: str  # message id | forget card id | correction evidence id
    attempts: int = 0


@dataclass
class MemoryInput:
    user_id: str
    retry_seconds: float = 300.0  # from settings: workflow code reads no environment
    activity_attempts: int = 5  # Temporal retries of one job before it waits a round
    pending: list[MemoryJob] = field(default_factory=list)
    retry_later: list[MemoryJob] = field(default_factory=list)


@dataclass
class ExtractInput:
    user_id: str
    message_id: str


@dataclass
class ExtractOutput:
    evidence_id: str
    stored: int  # candidates that became or confirmed a memory
    dropped: int
    skipped: str | None = None


@dataclass
class ForgetInput:
    user_id: str
    card_id: str


@dataclass
class ForgetOutput:
    evidence_ids: list[str]
    deleted_version_ids: list[str]
    profile_version: int | None


@dataclass
class CorrectInput:
    user_id: str
    evidence_id: str


@dataclass
class CorrectOutput:
    memory_id: str
    version_id: str
    version: int

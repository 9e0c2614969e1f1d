"""Shared plumbing of the memory tests: a user, message rows, services on a fresh index."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from activities.memory import MemoryActivities
from llm.types import ModelRequest, ModelResponse, ToolUseBlock
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.models import MessageRow
from lomo.ids import new_id
from lomo.settings import Settings
from memory.services import MemoryServices, install_services
from memory.types import ExtractInput, ExtractOutput
from standin.extract import offline_extract
from tools.base import ToolDeps
from vectors.edge import EdgeVectorIndex
from vectors.embeddings import FakeEmbedder
from workspace.store import AssetStore


class OfflineExtractor:
    """The offline stand-in's extraction path, as a provider."""

    name = "offline-extract"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return offline_extract(request)


class ScriptedExtractor:
    """Answers every extraction with the given candidates (what a wayward model might say)."""

    name = "scripted-extract"

    def __init__(self, candidates: Any) -> None:
        self.candidates = candidates

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(
            content=[ToolUseBlock("toolu_1", "record_memories", {"candidates": self.candidates})],
            stop_reason="tool_use",
        )


@dataclass
class Env:
    db: Database
    settings: Settings
    deps: ToolDeps
    services: MemoryServices
    acts: MemoryActivities
    user_id: str

    async def message(self, text: str, task_id: str | None = None) -> str:
        mid = new_id("msg")
        async with self.db.session() as s:
            s.add(MessageRow(id=mid, user_id=self.user_id, text=text, task_id=task_id))
        return mid

    async def say(self, text: str, task_id: str | None = None) -> ExtractOutput:
        mid = await self.message(text, task_id)
        return await self.acts.extract(ExtractInput(self.user_id, mid))


async def make_env(
    db: Database, tmp: Path, provider: Any = None, http: httpx.AsyncClient | None = None
) -> Env:
    settings = Settings(
        data_dir=tmp, database_url=db.url, embedder="fake", model_provider="offline"
    )
    services = MemoryServices(EdgeVectorIndex(tmp / "vectors"), FakeEmbedder(64))
    install_services(settings, services)
    deps = ToolDeps(
        db=db,
        http=http or httpx.AsyncClient(),
        assets=AssetStore(tmp / "assets"),
        settings=settings,
    )
    async with db.session() as s:
        user, _ = await create_user(s, "mem-tester")
    acts = MemoryActivities(deps, provider or OfflineExtractor(), services)
    return Env(db, settings, deps, services, acts, user.id)

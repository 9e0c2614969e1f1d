"""Shared plumbing of the memory tests: a user, message rows, services on a fresh index."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from activities.memory import MemoryActivities
from llm.types import ModelRequest, ModelResponse, ToolUseBlock
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.db.models import MessageRow
from lomo.ids import new_id
from lomo.settings import Settings
from memory.models import Evidence
from memory.services import MemoryServices, install_services
from memory.types import ExtractInput, ExtractOutput
from standin.extract import offline_extract
from tests.helpers import eventually
from tests.stack import Stack
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


def start_memory_service(data_dir: Path, db_url: str, port: int) -> subprocess.Popen[bytes]:
    """`lomo memory` as a real process on `port` (fake embedder, offline model), ready."""
    env = dict(
        os.environ,
        LOMO_DATA_DIR=str(data_dir),
        LOMO_DATABASE_URL=db_url,
        LOMO_MEMORY_PORT=str(port),
        LOMO_EMBEDDER="fake",
        LOMO_MODEL_PROVIDER="offline",
    )
    data_dir.mkdir(parents=True, exist_ok=True)
    log = (data_dir / "memory-service.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "memory"], env=env, stdout=log, stderr=log
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    out = (data_dir / "memory-service.log").read_text(errors="replace")
    raise AssertionError(f"the memory service did not start:\n{out[-3000:]}")


# Memory in real task runs (tests.stack): post, wait for extraction, a finished task.
async def post(st: Stack, text: str) -> str:
    r = await st.api.post("/v1/messages", json={"text": text}, headers=st.auth)
    assert r.status_code == 202, r.text
    return str(r.json()["message_id"])


async def extracted(st: Stack, mid: str) -> bool:
    async with st.db.session() as s:
        ev = await s.scalar(select(Evidence).where(Evidence.message_id == mid))
        return ev is not None and ev.extracted_at is not None


async def wait_extracted(st: Stack, mid: str, within: float = 30.0) -> None:
    async def check() -> bool:
        return await extracted(st, mid)

    await eventually(check, within=within)


async def finished_task(st: Stack, mid: str) -> dict[str, Any]:
    async def routed() -> Any:
        m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
        return m["routing"].get("task_id")

    task_id = await eventually(routed)

    async def done() -> Any:
        t = (await st.api.get(f"/v1/tasks/{task_id}", headers=st.auth)).json()
        return t if t["status"] in ("completed", "failed") else None

    return dict(await eventually(done, within=60))


async def context_text(st: Stack, task_id: str) -> str:
    r = await st.api.get(f"/v1/tasks/{task_id}/context", headers=st.auth)
    assert r.status_code == 200, r.text
    return "\n".join(layer["text"] for layer in r.json()["layers"])

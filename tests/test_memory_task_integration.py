"""Memory inside real task runs (api → main thread → TaskWorkflow → context builder): the
profile reaches the context's stable prefix, forgetting takes it out of the next task's
context, and a memory outage never fails the task."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from temporalio.client import Client

from memory.models import MemoryUsage, MemoryVersion
from memory.services import MemoryServices, close_services, install_services
from tests.helpers import eventually
from tests.memory_support import context_text, finished_task, post, wait_extracted
from tests.stack import running_stack
from tests.test_memory_degradation import BrokenIndex
from vectors.embeddings import FakeEmbedder


async def test_profile_reaches_the_context_and_forgetting_takes_it_out(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, embedder="fake"
    ) as st:
        for text in ("Our brand's main colour is blue.", "Blue with cream white feels softer."):
            await wait_extracted(st, await post(st, text))
        before = await finished_task(st, await post(st, "Generate an image of a red tabby cat"))
        assert before["status"] == "completed"
        assert "cream white" in await context_text(st, before["task_id"])
        # Each step recorded the memory version its context drew on (the profile's colour,
        # its second version), written with the stored step: forgetting it excludes them.
        async with st.db.session() as s:
            versions = set(
                await s.scalars(select(MemoryVersion.id).where(MemoryVersion.status == "active"))
            )
            used = list(
                await s.execute(
                    select(MemoryUsage.turn, MemoryUsage.step, MemoryUsage.version_id).where(
                        MemoryUsage.task_id == before["task_id"]
                    )
                )
            )
        assert len(versions) == 1 and {v for _, _, v in used} == versions
        assert len(used) == len({(t, n) for t, n, _ in used}) > 0

        r = await st.api.post("/v1/memory/forget", json={"text": "blue"}, headers=st.auth)
        card_id = r.json()["card_id"]
        r = await st.api.post(
            f"/v1/cards/{card_id}/actions", json={"action": "confirm"}, headers=st.auth
        )
        assert r.status_code == 200

        async def gone() -> bool:
            prof = (await st.api.get("/v1/memory/profile", headers=st.auth)).json()
            return prof["version"] == 3 and prof["items"] == []

        await eventually(gone)
        after = await finished_task(st, await post(st, "Generate an image of a grey cat"))
        assert after["status"] == "completed"
        text = (await context_text(st, after["task_id"])).lower()
        assert "blue" not in text and "cream" not in text
    await close_services()


@pytest.mark.parametrize("mode", ["raise", "hang"])
async def test_memory_outage_never_fails_the_task(
    tmp_path: Path,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
    mode: str,
) -> None:
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        embedder="fake",
        memory_timeout_seconds=0.3,
    ) as st:
        broken = BrokenIndex(mode)  # the vector index is down, or answers nothing, ever
        install_services(st.settings, MemoryServices(broken, FakeEmbedder(64)))
        task = await finished_task(st, await post(st, "Generate an image of a red tabby cat"))
        assert task["status"] == "completed", task
        assert len(task["artifacts"]) == 1, task
        assert broken.calls >= 1
        assert "[runtime] degraded: memory:" in await context_text(st, task["task_id"])
    await close_services()

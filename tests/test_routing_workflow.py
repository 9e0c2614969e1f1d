"""MainThreadWorkflow on the real dev server: one unusable router answer does not end the
person's main thread; they are told, and the next message is routed."""

from __future__ import annotations

import uuid
from pathlib import Path

from sqlalchemy import select
from temporalio.client import Client
from temporalio.worker import Worker

from activities.routing import RoutingActivities
from llm.types import ModelResponse, TextBlock, ToolUseBlock
from lomo.db.engine import Database
from lomo.db.models import Event, MessageRow
from lomo.settings import Settings
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.routing_eval.support import add_message, seed_world
from vectors.edge import EdgeVectorIndex
from vectors.embeddings import FakeEmbedder
from workflows.main_thread import MainThreadWorkflow
from workflows.task import TaskWorkflow
from workflows.types import MainThreadInput


async def test_bad_router_output_is_answered_and_the_thread_goes_on(
    db: Database, tmp_path: Path, temporal_client: Client, task_queue: str
) -> None:
    chatter = ModelResponse(content=[TextBlock(text="Sure!")], stop_reason="end_turn")
    answer = ModelResponse(
        content=[ToolUseBlock(id="t", name="route", input={"decision": "answer", "answer": "Hi"})],
        stop_reason="tool_use",
    )
    acts = RoutingActivities(
        db,
        ScriptedProvider([chatter, answer]),
        Settings(data_dir=tmp_path, model_provider="offline", task_queue=task_queue),
        embedder=FakeEmbedder(),
        vectors=EdgeVectorIndex(tmp_path / "vectors"),
    )
    world = await seed_world(db, [])
    first = await add_message(db, world.user_id, "blah")
    second = await add_message(db, world.user_id, "hello")
    async with Worker(
        temporal_client,
        task_queue=task_queue,
        workflows=[MainThreadWorkflow, TaskWorkflow],
        activities=acts.all(),
    ):
        handle = await temporal_client.start_workflow(
            MainThreadWorkflow.run,
            MainThreadInput(world.user_id, [first, second]),
            id=f"main:{world.user_id}:{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )

        async def both_routed() -> bool:
            async with db.session() as s:
                rows = list(
                    await s.scalars(select(MessageRow).where(MessageRow.id.in_([first, second])))
                )
            return all(m.routing_status == "routed" for m in rows)

        await eventually(both_routed, within=30)
        desc = await handle.describe()
        assert desc.status is not None and desc.status.name == "RUNNING"
        await handle.terminate()
    async with db.session() as s:
        replies = [
            e.data
            for e in await s.scalars(
                select(Event).where(Event.user_id == world.user_id, Event.type == "task.reply")
            )
        ]
    by_msg = {r["message_id"]: r["text"] for r in replies}
    assert "could not tell where this message belongs" in by_msg[first]
    assert by_msg[second] == "Hi"

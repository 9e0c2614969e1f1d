"""A worker SIGKILLed while the model's reply streams: Temporal retries the step on a
second worker (its heartbeat lease ran out), the reply completes once, and neither the
page's rule nor the AG-UI client shows any text twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.client import Client

from api.services.agui_run import AgUiRun
from journal.drafts import DELTA_EVENT, shown_text
from lomo.db.engine import Database
from lomo.db.models import Event
from standin.server import create_standin_app
from tests.helpers import ThreadServer, eventually
from tests.runtime_support import (
    CountingResponder,
    Workers,
    kill,
    new_user,
    standin_worker_env,
    start_task,
    text,
)

pytestmark = pytest.mark.slow

LONG = " ".join(f"Part {i} of the brief, written slowly." for i in range(40))


async def _events(db: Database, user_id: str) -> list[Event]:
    async with db.session() as s:
        q = select(Event).where(Event.user_id == user_id).order_by(Event.seq)
        return list(await s.scalars(q))


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # one backend: slow
async def test_worker_killed_mid_stream(
    tmp_path: Path,
    db: Database,
    db_url: str,
    temporal_server: str,
    temporal_client: Client,
    task_queue: str,
) -> None:
    app = create_standin_app(CountingResponder(lambda _request, _n: text(LONG)))
    app.state.stream_delay = 0.03  # about 4 s for the whole reply
    with ThreadServer(app) as model_server:
        env = standin_worker_env(
            tmp_path,
            db_url,
            temporal_server,
            task_queue,
            model_server.url,
            LOMO_STREAM_FLUSH_SECONDS="0.05",
        )
        with Workers(env, tmp_path) as workers:
            first = workers.spawn("worker1")
            user = await new_user(db)
            task_id, handle = await start_task(
                temporal_client,
                db,
                task_queue,
                user,
                "write the brief",
                # Short enough that the kill is noticed soon, long enough that the second
                # worker, starting on a loaded machine, beats in time while it streams.
                heartbeat_timeout_seconds=6,
            )

            async def streaming() -> Any:
                deltas = [e for e in await _events(db, user) if e.type == DELTA_EVENT]
                return len(deltas) >= 3 or None

            await eventually(streaming, within=60)
            kill(first)
            workers.spawn("worker2")
            assert await handle.result() == "completed"

    events = await _events(db, user)
    deltas = [e.data for e in events if e.type == DELTA_EVENT]
    # The killed attempt, then the retry (on a loaded machine a retry can itself outlive
    # its heartbeat lease once more: any later attempt follows the same rule).
    attempts = sorted({d["attempt"] for d in deltas})
    assert attempts[:2] == [1, 2], deltas
    first_text = "".join(d["text"] for d in deltas if d["attempt"] == 1)
    assert 0 < len(first_text) < len(LONG)  # the first attempt was cut off mid-stream
    # The page's rule: the latest attempt's draft replaces the partial text (the final
    # text, whole, then replaces the draft).
    last_text = "".join(d["text"] for d in deltas if d["attempt"] == attempts[-1])
    assert shown_text(deltas) == last_text and LONG.startswith(last_text)
    assert [e.data["text"] for e in events if e.type == "task.reply"] == [LONG]  # once

    # The AG-UI client's view of the same log: every piece of text once, in order.
    run = AgUiRun("t", "r", None, task_id=task_id)
    told = [out for e in events for out in run.on_event(e.type, e.data)]
    content = "".join(getattr(x, "delta", "") for x in told if x.type == "TEXT_MESSAGE_CONTENT")
    assert content == LONG
    assert [x.type for x in told].count("TEXT_MESSAGE_START") == 1
    assert "MESSAGES_SNAPSHOT" not in [x.type for x in told]

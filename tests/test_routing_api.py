"""Routing over real HTTP, a real worker and the real dev server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from temporalio.client import Client

from cards.store import create_card
from lomo.auth import create_user
from lomo.db.models import MessageRow, Task, TaskObject, WorkObject
from lomo.ids import new_id
from routing.models import RoutingRecord
from standin.model import OfflineModel
from tests.helpers import eventually
from tests.routing_eval.support import CountingProvider
from tests.stack import Stack, running_stack


def _route_calls(p: CountingProvider) -> int:
    return sum(1 for r in p.requests if r.purpose == "route")


async def _post(stack: Stack, **body: Any) -> Any:
    return await stack.api.post("/v1/messages", json=body, headers=stack.auth)


async def _message(stack: Stack, mid: str) -> dict[str, Any]:
    r = await stack.api.get(f"/v1/messages/{mid}", headers=stack.auth)
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


async def _routed(stack: Stack, mid: str) -> dict[str, Any]:
    async def check() -> Any:
        m = await _message(stack, mid)
        return m if m["routing"]["status"] == "routed" else None

    result: dict[str, Any] = await eventually(check, within=60)
    return result


async def _task_status(stack: Stack, task_id: str, status: str) -> bool:
    async with stack.db.session() as s:
        return await s.scalar(select(Task.status).where(Task.id == task_id)) == status


async def _processed(stack: Stack, mid: str) -> dict[str, Any]:
    async def check() -> Any:
        m = await _message(stack, mid)
        return m if m.get("processed") else None

    result: dict[str, Any] = await eventually(check, within=60)
    return result


async def _seed_task(stack: Stack, goal: str, kind: str, status: str, age: timedelta) -> str:
    when = datetime.now(UTC) - age
    async with stack.db.session() as s:
        task = Task(
            id=new_id("tsk"),
            user_id=stack.user_id,
            kind=kind,
            status=status,
            goal=goal,
            created_at=when,
            updated_at=when,
        )
        s.add(task)
    return task.id


async def test_explicit_targets_cost_no_model_call_and_bad_targets_are_refused(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    provider = CountingProvider(OfflineModel())
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider
    ) as stack:
        r = await _post(stack, text="Create a series of brand posters for the summer festival")
        assert r.status_code == 202, r.text
        first = await _routed(stack, r.json()["message_id"])
        assert first["routing"]["decision"] == "new"
        task_id = first["routing"]["task_id"]
        await _processed(stack, r.json()["message_id"])
        async with stack.db.session() as s:
            obj = WorkObject(id=new_id("obj"), user_id=stack.user_id, type="asset", name="B")
            s.add(obj)
            await s.flush()
            s.add(TaskObject(task_id=task_id, object_id=obj.id))
            card = await create_card(
                s, user_id=stack.user_id, kind="select", title="Pick", task_id=task_id
            )
            orphan = await create_card(s, user_id=stack.user_id, kind="confirm", title="?")
            other, _ = await create_user(s, "someone else")
            theirs = WorkObject(id=new_id("obj"), user_id=other.id, type="asset", name="X")
            gone = WorkObject(
                id=new_id("obj"), user_id=stack.user_id, type="asset", name="old", deleted=True
            )
            s.add_all([theirs, gone])
        route_calls = _route_calls(provider)
        assert route_calls == 1

        # Task id, card, object of exactly one task: straight to the task's inbox.
        for target in ({"task_id": task_id}, {"card_id": card.id}, {"object_id": obj.id}):
            r = await _post(stack, text="a bit warmer", **target)
            assert r.status_code == 202, r.text
            assert r.json()["routing"] == {
                "status": "routed",
                "deterministic": True,
                "decision": "existing",
                "task_id": task_id,
            }
            done = await _processed(stack, r.json()["message_id"])
            assert done["processed"]["task_id"] == task_id
        assert _route_calls(provider) == route_calls  # not one routing call for the three

        # Checks before delivery: a clear answer, never a silent drop.
        r = await _post(stack, text="x", object_id=theirs.id)
        assert r.status_code == 404 and r.json()["error"] == "not_found"
        r = await _post(stack, text="x", object_id=gone.id)
        assert r.status_code == 409 and "deleted" in r.json()["detail"]
        r = await _post(stack, text="x", card_id=orphan.id)
        assert r.status_code == 400 and "belongs to no task" in r.json()["detail"]
        # The last message's turn ends with the task's own status write: let it land first,
        # or it overwrites the status this test sets next.
        await eventually(lambda: _task_status(stack, task_id, "waiting_user"), within=60)
        for status in ("archived", "stopped"):
            async with stack.db.session() as s:
                t = await s.get(Task, task_id)
                assert t is not None
                t.status = status
            r = await _post(stack, text="x", task_id=task_id)
            assert r.status_code == 409, r.text
            assert r.json()["task_status"] == status
            assert status in r.json()["detail"]
        async with stack.db.session() as s:
            refused = await s.scalar(select(MessageRow).where(MessageRow.text == "x"))
        assert refused is None  # a refused message leaves nothing half-routed
        assert _route_calls(provider) == route_calls


async def test_clarify_card_routes_the_message_to_the_chosen_task(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    provider = CountingProvider(OfflineModel())
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider
    ) as stack:
        lighthouse = await _seed_task(
            stack,
            "Generate an image of a lighthouse",
            "lightweight",
            "completed",
            timedelta(minutes=3),
        )
        fox = await _seed_task(
            stack, "Generate an image of a fox", "lightweight", "completed", timedelta(minutes=5)
        )
        r = await _post(stack, text="Make that blue")
        mid = r.json()["message_id"]
        asked = await _routed(stack, mid)
        assert asked["routing"]["decision"] == "clarify"
        assert "task_id" not in asked["routing"]
        cards = (await stack.api.get("/v1/cards?status=open", headers=stack.auth)).json()["cards"]
        card = next(c for c in cards if c["kind"] == "clarify")
        assert {o["id"] for o in card["options"]} == {lighthouse, fox, "new"}
        assert card["task_id"] is None
        calls = _route_calls(provider)

        r = await stack.api.post(
            f"/v1/cards/{card['card_id']}/actions",
            json={"action": "select", "option_id": fox},
            headers=stack.auth,
        )
        assert r.status_code == 200, r.text

        async def rerouted() -> Any:
            m = await _message(stack, mid)
            return m if m["routing"].get("task_id") else None

        m = await eventually(rerouted, within=60)
        assert m["routing"]["decision"] == "existing" and m["routing"]["task_id"] == fox
        # The chosen (completed) lightweight task was started again in place and read it.
        done = await _processed(stack, mid)
        assert done["processed"]["task_id"] == fox
        assert _route_calls(provider) == calls  # the person's choice needs no model
        async with stack.db.session() as s:
            n = await s.scalar(
                select(RoutingRecord.model_calls).where(RoutingRecord.key == card["card_id"])
            )
        assert n == 0


async def test_article_scenario_routing_over_http(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """Posters started, a cat video in between, a selection on the poster card,
    and days later "the posters from last time a bit warmer" lands in the poster task with
    no duplicate. The poster card here is made directly (the poster checklist that would
    raise it is the runtime's); time passing is the tasks' activity moved back three days."""
    provider = CountingProvider(OfflineModel())
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider
    ) as stack:
        r = await _post(stack, text="Create a series of brand posters for the summer festival")
        posters = await _routed(stack, r.json()["message_id"])
        assert posters["routing"]["decision"] == "new"
        poster_task = posters["routing"]["task_id"]
        await _processed(stack, r.json()["message_id"])

        r = await _post(stack, text="Make a five-second video of a cat playing")
        video = await _routed(stack, r.json()["message_id"])
        assert video["routing"]["decision"] == "lightweight"
        assert video["routing"]["task_id"] != poster_task

        async with stack.db.session() as s:
            card = await create_card(
                s,
                user_id=stack.user_id,
                kind="select",
                title="Which draft?",
                options=[{"id": "a", "label": "Draft A"}, {"id": "b", "label": "Draft B"}],
                task_id=poster_task,
            )
        r = await stack.api.post(
            f"/v1/cards/{card.id}/actions",
            json={"action": "select", "option_id": "b"},
            headers=stack.auth,
        )
        assert r.status_code == 200, r.text

        async def video_done() -> Any:
            t = (
                await stack.api.get(f"/v1/tasks/{video['routing']['task_id']}", headers=stack.auth)
            ).json()
            return t["status"] in ("completed", "failed")

        await eventually(video_done, within=60)
        async with stack.db.session() as s:  # "a few days later"
            for t in await s.scalars(select(Task).where(Task.user_id == stack.user_id)):
                t.updated_at = t.updated_at - timedelta(days=3)
            before = await s.scalar(select(func.count()).where(Task.user_id == stack.user_id))

        r = await _post(stack, text="the posters from last time a bit warmer")
        mid = r.json()["message_id"]
        later = await _routed(stack, mid)
        assert later["routing"]["decision"] == "existing"
        assert later["routing"]["task_id"] == poster_task
        done = await _processed(stack, mid)
        assert done["processed"]["task_id"] == poster_task
        async with stack.db.session() as s:
            after = await s.scalar(select(func.count()).where(Task.user_id == stack.user_id))
        assert after == before  # no duplicate task

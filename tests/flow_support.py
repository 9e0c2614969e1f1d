"""Helpers of the flow tests: flows built over HTTP, runs started, waited for and their
price cards answered, orders counted from the DB."""

from __future__ import annotations

from typing import Any, Protocol

import httpx
from sqlalchemy import func, select

from lomo.db.engine import Database
from lomo.db.models import GenerationOrder, Task
from lomo.ids import new_id
from tests.helpers import eventually


class Stack(Protocol):
    """What the helpers need of a test stack (tests/stack.py's or the money tests')."""

    api: httpx.AsyncClient
    db: Database
    user_id: str

    @property
    def auth(self) -> dict[str, str]: ...


ENDED = ("succeeded", "failed", "declined")


def film(shots: int, prompt: str = "shot") -> dict[str, Any]:
    """`shots` video clips cut together by one edit node."""
    nodes: dict[str, Any] = {
        f"shot{n}": {
            "type": "video",
            "params": {"prompt": f"{prompt} {n}", "duration_s": 2},
            "inputs": [],
        }
        for n in range(1, shots + 1)
    }
    nodes["edit"] = {"type": "edit", "params": {"prompt": "final cut"}, "inputs": list(nodes)}
    return {"nodes": nodes}


async def owning_task(db: Database, user_id: str, goal: str = "a short film") -> str:
    """A task row to own the run (no TaskWorkflow: the run's wake-ups find nobody)."""
    task_id = new_id("tsk")
    async with db.session() as s:
        s.add(Task(id=task_id, user_id=user_id, kind="persistent", status="running", goal=goal))
    return task_id


async def create_flow(st: Stack, content: dict[str, Any], name: str = "film") -> str:
    r = await st.api.post(
        "/v1/objects", json={"type": "flow", "name": name, "content": content}, headers=st.auth
    )
    assert r.status_code == 201, r.text
    return str(r.json()["object_id"])


async def start_run(st: Stack, flow_id: str, task_id: str) -> str:
    r = await st.api.post(f"/v1/objects/{flow_id}/runs", json={"task_id": task_id}, headers=st.auth)
    assert r.status_code == 202, r.text
    return str(r.json()["run_id"])


async def run_view(st: Stack, run_id: str) -> dict[str, Any]:
    r = await st.api.get(f"/v1/flow-runs/{run_id}", headers=st.auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def wait_status(st: Stack, run_id: str, *statuses: str, within: float = 60) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        view = await run_view(st, run_id)
        return view if view["status"] in statuses else None

    return dict(await eventually(check, within=within, interval=0.2))


async def confirm_price(st: Stack, run_id: str) -> dict[str, Any]:
    """The run's one price card: answered by the person, returned as it was shown."""
    view = await wait_status(st, run_id, "waiting_price", *ENDED)
    assert view["status"] == "waiting_price", view
    r = await st.api.get(f"/v1/cards/{view['card_id']}", headers=st.auth)
    card = dict(r.json())
    r = await st.api.post(
        f"/v1/cards/{view['card_id']}/actions", json={"action": "confirm"}, headers=st.auth
    )
    assert r.status_code == 200, r.text
    return card


async def orders(db: Database, user_id: str) -> int:
    async with db.session() as s:
        n = await s.scalar(
            select(func.count())
            .select_from(GenerationOrder)
            .where(GenerationOrder.workspace_id == user_id)
        )
        return int(n or 0)


async def price_cards(st: Stack) -> list[dict[str, Any]]:
    r = await st.api.get("/v1/cards", headers=st.auth)
    return [c for c in r.json()["cards"] if c["kind"] == "price"]


def storyboard(mara: str = "a fisherwoman in a yellow raincoat, grey braid") -> str:
    """A storyboard document: three named entities (two characters and a place) with
    attributes, before a free-text shot list no node reads."""
    return (
        "The lighthouse keeper's daughter, a short film.\n\n"
        "# Characters\n"
        "## Mara\n"
        f"description: {mara}\n"
        "voice: low and calm\n"
        "## Tom\n"
        "description: a boy of ten with a red scarf\n"
        "# Places\n"
        "## The lighthouse\n"
        "description: a white tower with a black lantern room\n"
    )


STORYBOARD_SHOTS = (
    "The lighthouse at dawn",
    "Mara walks along the cliffs",
    "Tom flies a kite on the beach",
    "Mara and Tom mend a net",
    "Tom watches the boats come in",
)


def storyboard_flow(document_id: str) -> dict[str, Any]:
    """The storyboard document feeding five shots (each names whom it shows in its prompt)
    and one edit cutting them together."""
    nodes: dict[str, Any] = {
        "storyboard": {"type": "document", "params": {"object_id": document_id}, "inputs": []}
    }
    for n, prompt in enumerate(STORYBOARD_SHOTS, 1):
        nodes[f"shot{n}"] = {
            "type": "image",
            "params": {"prompt": prompt},
            "inputs": ["storyboard"],
        }
    shots = [f"shot{n}" for n in range(1, len(STORYBOARD_SHOTS) + 1)]
    nodes["edit"] = {"type": "edit", "params": {"prompt": "final cut"}, "inputs": shots}
    return {"nodes": nodes}

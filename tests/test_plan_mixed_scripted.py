"""A real model gets the same room as the offline one: a scripted model that plans parts of
three media (two posters, a jingle of 12 s, a reel of 8 s) through the checklist tools
runs to the end on the real stack (api and simulator over HTTP, worker, Temporal dev
server): one price card for the whole plan, every part made in its medium and length and
carried by its step, the task completed. Nothing in the system text or the tools names a
closed list of plan forms."""

from __future__ import annotations

import io
import re
import wave
from pathlib import Path
from typing import Any

from sqlalchemy import select
from temporalio.client import Client

from context.build import SYSTEM_RULES
from llm.types import ModelRequest, ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from lomo.db.engine import Database
from lomo.db.models import Card
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import start_task
from tests.stack import running_stack
from tools.checklist import checklist_tools
from tools.generation import generation_tools

PARTS = {  # checklist title → (tool, its input)
    "2 posters": [("generate_image", {"prompt": f"poster {k}"}) for k in (1, 2)],
    "1 jingle of 12 s": [("generate_audio", {"prompt": "a jingle", "duration_s": 12})],
    "1 reel of 8 s": [("generate_video", {"prompt": "a reel", "duration_s": 8})],
}
PRICE = 2 * 4 + 5 + 40
_ITEM = re.compile(r"^  - \[(\w+)\] (chk_[0-9a-z]+): (.*?)(?: artifacts .*)?$", re.MULTILINE)
_MADE = re.compile(r"generation succeeded: order (ord_[0-9a-z]+) → asset (obj_[0-9a-z]+)")


def _response(*uses: tuple[str, dict[str, Any]], said: str = "") -> ModelResponse:
    blocks: list[TextBlock | ToolUseBlock] = [TextBlock(text=said)] if said else []
    blocks += [
        ToolUseBlock(id=f"toolu_{n}_{u[0]}", name=u[0], input=u[1]) for n, u in enumerate(uses)
    ]
    return ModelResponse(
        content=blocks,
        stop_reason="tool_use" if uses else "end_turn",
        usage=Usage(input_tokens=10, output_tokens=5),
    )


def _history(request: ModelRequest) -> tuple[str, dict[str, str], dict[str, str]]:
    """The whole history's runtime text; each tool use's name by id; each order's tool use."""
    text, names, orders = "", {}, {}
    for m in request.messages:
        for b in m.content:
            if isinstance(b, TextBlock) and b.text.startswith("[runtime]"):
                text += b.text + "\n"
            elif isinstance(b, ToolUseBlock):
                names[b.id] = b.name
            elif isinstance(b, ToolResultBlock):
                for order in re.findall(r"ord_[0-9a-z]+", b.content):
                    orders[order] = b.tool_use_id
    return text, names, orders


def policy(request: ModelRequest) -> ModelResponse:
    """What a model would do, read off each request like a model reads it: plan, wait for
    the price, order every piece, then mark each step done with its own results."""
    text, names, orders = _history(request)
    last = "".join(b.text for b in request.messages[-1].content if isinstance(b, TextBlock))
    items = _ITEM.findall(last)
    if not items and "request_budget" not in names.values():
        add = [{"title": t} for t in PARTS]
        ask = {"amount_cents": PRICE, "purpose": ", ".join(PARTS)}
        return _response(("update_checklist", {"add": add}), ("request_budget", ask))
    if not any(n.startswith("generate_") for n in names.values()):
        if "answered card" not in text or ": confirm" not in text:
            return _response(said="The plan waits for your price confirmation.")
        return _response(*(u for uses in PARTS.values() for u in uses))
    made = dict(_MADE.findall(last))
    open_items = [(i, t) for s, i, t in items if s != "done"]
    if not open_items:
        return _response(said="Everything is made.")
    if len(made) < sum(len(v) for v in PARTS.values()):
        return _response(said="Working on it.")
    by_tool: dict[str, list[str]] = {}
    for order, obj in made.items():
        by_tool.setdefault(names[orders[order]], []).append(obj)
    update = []
    for item_id, title in open_items:
        tool = PARTS[title][0][0]
        update.append({"id": item_id, "status": "done", "artifacts": by_tool[tool]})
    return _response(("update_checklist", {"update": update}))


def test_nothing_in_the_system_text_or_the_tools_closes_the_forms() -> None:
    """A real model may plan any mix of parts: no tool or rule names the offline model's
    forms as the plans there are."""
    closed = re.compile(r"\b(brand[ _]kit|series, book|four forms)\b", re.I)
    assert not closed.search(SYSTEM_RULES)
    tools = [*checklist_tools(None), *generation_tools(None)]  # type: ignore[arg-type]
    for tool in tools:
        assert not closed.search(f"{tool.spec.description} {tool.spec.input_schema}"), tool


async def _price_card(db: Database, task_id: str) -> Card | None:
    async with db.session() as s:
        return await s.scalar(select(Card).where(Card.task_id == task_id, Card.kind == "price"))


async def test_a_scripted_plan_of_three_media_runs_to_the_end(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    provider = ScriptedProvider([policy] * 40)
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        r = await st.api.put(
            "/v1/budget/settings", json={"free_confirm_amount": 0}, headers=st.auth
        )
        assert r.status_code == 200
        task_id, _ = await start_task(
            temporal_client,
            st.db,
            task_queue,
            st.user_id,
            "two posters, a 12-second jingle and an 8-second reel for my band",
            kind="persistent",
            generation_wait_seconds=2,
            card_wait_seconds=5,
        )
        card = await eventually(lambda: _price_card(st.db, task_id), within=60)
        assert card.price_cents == PRICE  # one price for exactly the parts planned
        r = await st.api.post(
            f"/v1/cards/{card.id}/actions", json={"action": "confirm"}, headers=st.auth
        )
        assert r.status_code == 200

        async def finished() -> dict[str, Any] | None:
            t = (await st.api.get(f"/v1/tasks/{task_id}", headers=st.auth)).json()
            return t if all(i["status"] == "done" for i in t["checklist"]) else None

        task = await eventually(finished, within=120)
        made: dict[str, list[tuple[str, float | None]]] = {}
        for item in task["checklist"]:
            for obj in item["artifacts"]:
                view = (await st.api.get(f"/v1/objects/{obj}", headers=st.auth)).json()
                blob = (await st.api.get(f"/v1/objects/{obj}/blob", headers=st.auth)).content
                kind = str(view["content"]["media_type"]).split("/")[0]
                seconds = None
                if kind == "audio":
                    with wave.open(io.BytesIO(blob)) as w:
                        seconds = w.getnframes() / w.getframerate()
                made.setdefault(item["title"], []).append((kind, seconds))
        assert made == {
            "2 posters": [("image", None), ("image", None)],
            "1 jingle of 12 s": [("audio", 12.0)],
            "1 reel of 8 s": [("video", None)],
        }
        done = await eventually(lambda: _status(st, task_id, "completed"), within=60)
        assert done and len(task["artifacts"]) == 4


async def _status(st: Any, task_id: str, wanted: str) -> bool:
    t = (await st.api.get(f"/v1/tasks/{task_id}", headers=st.auth)).json()
    return bool(t["status"] == wanted)

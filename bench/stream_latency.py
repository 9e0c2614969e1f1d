"""Streamed replies: how soon the person sees the model's text.

    .venv/bin/python bench/stream_latency.py [--turns 100]

The embedded stack as `lomo up` runs it (api and worker as their own processes, SQLite,
the dev server), its model the real Anthropic SDK against the Messages-API stand-in,
served by this process and answering at once. A client holds `GET /v1/events` open and
posts `POST /v1/tasks/{id}/messages` to one persistent task, one turn after another.
Two figures per turn, both read on this process's clock:

- first token → client: from the stand-in writing the reply's first text delta to the
  client reading the first `reply.delta` event;
- message → first token at the client: from the POST's start to that same event.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bench.support import HEADER, Embedded, machine, row
from llm.types import ModelRequest, ModelResponse, TextBlock, Usage
from standin.model import OfflineModel
from standin.server import create_standin_app
from tests.helpers import ThreadServer

REPLY = "Noted. I will keep the warm palette and try a second layout with more air at the top."
WARMUP = 5


class FirstText:
    """Notes when the stand-in's response body first carries a text delta."""

    def __init__(self, app: ASGIApp) -> None:
        self.app, self.stamps = app, list[float]()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        first = True

        async def stamped(message: Message) -> None:
            nonlocal first
            await send(message)
            body = message.get("body", b"") if message["type"] == "http.response.body" else b""
            if first and b"text_delta" in body:
                first = False
                self.stamps.append(time.perf_counter())

        await self.app(scope, receive, stamped)


async def responder(request: ModelRequest) -> ModelResponse:
    if request.purpose != "task_step":
        return await OfflineModel().complete(request)
    return ModelResponse([TextBlock(REPLY)], "end_turn", Usage(100, 20))


async def run(stack: Embedded, token: str, model: FirstText, turns: int) -> list[str]:
    auth = {"Authorization": f"Bearer {token}"}
    firsts: dict[int, float] = {}
    replies: dict[int, float] = {}
    async with httpx.AsyncClient(base_url=stack.api_url, timeout=60) as http:
        listener = asyncio.create_task(_listen(http, auth, firsts, replies))
        await asyncio.sleep(1)
        task_id = await _task(http, auth, replies)
        to_client, to_first = [], []
        for i in range(WARMUP + turns):
            turn = max(replies) + 1
            t0 = time.perf_counter()
            r = await http.post(
                f"/v1/tasks/{task_id}/messages", json={"text": f"note {i}"}, headers=auth
            )
            r.raise_for_status()
            while turn not in replies:  # noqa: ASYNC110 (the listener fills it)
                await asyncio.sleep(0.001)
            if i >= WARMUP:
                to_client.append((firsts[turn] - model.stamps[-1]) * 1000)
                to_first.append((firsts[turn] - t0) * 1000)
            await asyncio.sleep(0.05)  # the turn's trailing writes stay out of the next
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
    return [
        row("model's first token → SSE client", to_client, "target p50 ≤ 30 ms"),
        row("POST task message → first token at the client", to_first, "target p50 ≤ 150 ms"),
    ]


async def _task(http: httpx.AsyncClient, auth: dict[str, str], replies: dict[int, float]) -> str:
    body = {"text": "Plan a poster series for a jazz festival, three directions please"}
    mid = (await http.post("/v1/messages", json=body, headers=auth)).json()["message_id"]
    while not replies:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    m = (await http.get(f"/v1/messages/{mid}", headers=auth)).json()
    return str(m["routing"]["task_id"])


async def _listen(
    http: httpx.AsyncClient,
    auth: dict[str, str],
    firsts: dict[int, float],
    replies: dict[int, float],
) -> None:
    async with http.stream("GET", "/v1/events", headers=auth) as r:
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            ev: dict[str, Any] = json.loads(line[6:])
            d = ev["data"]
            if ev["type"] == "reply.delta":
                firsts.setdefault(d["turn"], time.perf_counter())
            elif ev["type"] == "task.reply" and "turn" in d:
                replies[d["turn"]] = time.perf_counter()


def main(turns: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lomo-stream-"))
    model = FirstText(create_standin_app(responder))
    with ThreadServer(model) as server:
        env = {
            "LOMO_MODEL_PROVIDER": "anthropic",
            "ANTHROPIC_API_KEY": "bench",
            "LOMO_ANTHROPIC_BASE_URL": server.url,
        }
        with Embedded(tmp, **env) as stack:
            token = _demo_token(stack)
            lines = [HEADER, *asyncio.run(run(stack, token, model, turns))]
    sys.stdout.write("\n".join([*lines, f"machine: {machine()}"]) + "\n")


def _demo_token(stack: Embedded) -> str:
    from lomo.auth import create_user
    from lomo.db.engine import Database

    async def make() -> str:
        db = Database(stack.db_url)
        async with db.session() as s:
            _, token = await create_user(s, "bench")
        await db.dispose()
        return token

    return asyncio.run(make())


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--turns", type=int, default=100)
    main(p.parse_args().turns)

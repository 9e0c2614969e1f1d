"""Shared by the hand-off tests: fail (or hang) the api's hand-off to Temporal at exactly the
point after the message's or the card answer's commit, and read a message back over HTTP."""

from __future__ import annotations

import asyncio
from types import ModuleType
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

import api.services.handoff as handoff
from tests.helpers import eventually
from tests.stack import Stack


def fail_hand_off(
    monkeypatch: pytest.MonkeyPatch, name: str, times: int = 1, module: ModuleType = handoff
) -> list[str]:
    """The api's hand-off `name` (in `module`, by default api/services/handoff.py) raises `times`
    times, as when the dev server is down; the row is committed by then."""
    real = getattr(module, name)
    failed: list[str] = []

    async def flaky(*args: Any) -> Any:
        if len(failed) < times:
            failed.append(str(args))
            raise RPCError("temporal unavailable", RPCStatusCode.UNAVAILABLE, b"")
        return await real(*args)

    monkeypatch.setattr(module, name, flaky)
    return failed


def hang_hand_off(monkeypatch: pytest.MonkeyPatch, name: str, module: ModuleType) -> list[str]:
    """The api's hand-off `name` never returns, as a Temporal client does while the dev
    server restarts or no worker takes an update; returns the calls it swallowed."""
    calls: list[str] = []

    async def stuck(*args: Any) -> Any:
        calls.append(str(args))
        await asyncio.Event().wait()

    monkeypatch.setattr(module, name, stuck)
    return calls


def count_hand_off(monkeypatch: pytest.MonkeyPatch, name: str, module: ModuleType) -> list[str]:
    """The real hand-off `name`, each call recorded."""
    real = getattr(module, name)
    calls: list[str] = []

    async def counted(*args: Any) -> Any:
        calls.append(str(args))
        return await real(*args)

    monkeypatch.setattr(module, name, counted)
    return calls


class TcpProxy:
    """The api's way to Temporal, to cut while the api is connected: `stop` refuses new
    connections and drops the open ones, as a dev server that went down does (the client
    then retries its calls for a while); `start` again on the same port brings it back."""

    def __init__(self, target: str, port: int) -> None:
        host, target_port = target.rsplit(":", 1)
        self.target = (host, int(target_port))
        self.address = f"127.0.0.1:{port}"
        self.port = port
        self.server: asyncio.Server | None = None
        self.open: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for w in self.open:
            w.close()
        self.open.clear()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.open |= {writer, up_writer}
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def get_message(stack: Stack, mid: str) -> dict[str, Any]:
    r = await stack.api.get(f"/v1/messages/{mid}", headers=stack.auth)
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


async def persistent_task(stack: Stack) -> str:
    """A persistent task (it waits on its price card) takes messages itself: the direct
    path, no main thread. Its id once the main thread routed the request."""
    r = await stack.api.post(
        "/v1/messages",
        json={"text": "Make me a series of retro-style brand posters"},
        headers=stack.auth,
    )
    first = r.json()["message_id"]

    async def task_of_first() -> Any:
        return (await get_message(stack, first))["routing"].get("task_id")

    return str(await eventually(task_of_first, within=60))

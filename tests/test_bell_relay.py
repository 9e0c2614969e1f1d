"""The event bell across processes (lomo/bell_relay.py).

The worker's events (a reply, a task's status) reached the api's SSE streams only through
their poll, every `sse_poll_seconds`. These tests make the poll too slow to matter (or
leave it out) and need the wake-up to come from the other process: without the relay
each of them times out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from lomo.bell_relay import MAX_DATAGRAM, BellRelay
from lomo.db.engine import Database
from lomo.events import BELL, bell_relay
from tests.helpers import eventually
from tests.runtime_support import ROOT, Workers, new_user, worker_env
from tests.stack import running_stack

# Far longer than any wake-up takes, far shorter than the streams' poll in the e2e test.
WAKE_S = 30.0

_APPEND = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from lomo.db.engine import Database
    from lomo.events import append_event, bell_relay

    async def main(url: str, bell: str, user_id: str) -> None:
        db = Database(url, relay=bell_relay(Path(bell)))
        async with db.session() as s:
            await append_event(s, user_id, "probe", {"from": "another process"})
        await db.dispose()

    asyncio.run(main(*sys.argv[1:]))
    """
)


async def test_a_commit_in_another_process_wakes_this_process_streams(
    tmp_path: Path, db: Database, db_url: str
) -> None:
    user_id = await new_user(db)
    relay = bell_relay(tmp_path / "bell")
    assert relay.listen()
    bell = BELL.waiter(user_id)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _APPEND, db_url, str(tmp_path / "bell"), user_id, cwd=ROOT
        )
        assert await proc.wait() == 0
        # Nothing in this process wrote: only the other process's datagram rings.
        await asyncio.wait_for(bell.wait(), WAKE_S)
    finally:
        BELL.forget(user_id, bell)
        relay.close()
    assert not list((tmp_path / "bell").iterdir()), "the listener's socket stays behind"


async def test_every_person_of_a_large_commit_is_rung(tmp_path: Path) -> None:
    """More ids than one datagram holds go out in several."""
    rung: set[str] = set()
    listener = BellRelay(tmp_path, rung.add)
    sender = BellRelay(tmp_path, lambda _: None)
    assert listener.listen()
    ids = {f"usr_{i:020d}" for i in range(600)}
    assert sum(len(i) + 1 for i in ids) > 2 * MAX_DATAGRAM
    try:
        sender.send(ids)

        async def all_rung() -> bool:
            return rung == ids

        await eventually(all_rung, within=WAKE_S, interval=0.01)
    finally:
        listener.close()
        sender.close()


async def test_a_dead_listeners_socket_is_dropped_and_a_send_never_raises(
    tmp_path: Path,
) -> None:
    dead = tmp_path / "1-dead.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(dead))
    s.close()  # the file stays, nobody reads: a process killed without cleaning up
    (tmp_path / "notes.txt").write_text("not a socket")
    rung: list[str] = []
    live = BellRelay(tmp_path, rung.append)
    assert live.listen()
    sender = BellRelay(tmp_path, lambda _: None)
    try:
        assert sorted(sender.peers()) == sorted([str(dead), str(live.listening)])
        sender.send(["usr_a"])  # must not raise on the dead one
        assert not dead.exists()

        async def rung_once() -> bool:
            return rung == ["usr_a"]

        await eventually(rung_once, within=WAKE_S, interval=0.01)
        # A listener never sends to itself: its own process rang its streams already.
        assert live.peers() == []
    finally:
        live.close()
        sender.close()


async def test_where_no_socket_can_be_made_the_streams_are_left_to_the_poll(
    tmp_path: Path,
) -> None:
    """A path too long for a socket, or a bell directory that cannot be made: the api
    starts anyway (its streams poll), and sending raises nothing."""
    (tmp_path / "taken").write_text("a file where the directory would be")
    for where in (tmp_path / ("d" * 120), tmp_path / "taken" / "bell"):
        relay = BellRelay(where, lambda _: None)
        assert not relay.listen()
        assert relay.listening is None
        relay.send(["usr_a"])  # nothing to send to, nothing raised
        relay.close()


async def test_a_reply_written_by_the_worker_process_reaches_an_open_stream(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """The api and the worker as `lomo up` runs them, two processes; the streams' poll at
    two minutes: the worker's reply must arrive through the relay."""
    async with running_stack(
        tmp_path,
        db_url,
        temporal_server,
        temporal_client,
        task_queue,
        in_process_worker=False,
        sse_poll_seconds=120.0,
    ) as stack:
        env = worker_env(
            tmp_path, db_url, temporal_server, task_queue, LOMO_MODEL_PROVIDER="offline"
        )
        with Workers(env, tmp_path) as workers:
            workers.spawn("worker")
            seen: list[dict[str, Any]] = []
            connected = asyncio.Event()

            async def read() -> None:
                async with httpx.AsyncClient(base_url=str(stack.api.base_url)) as c:
                    async with c.stream("GET", "/v1/events", headers=stack.auth, timeout=None) as r:
                        assert r.status_code == 200
                        connected.set()
                        async for line in r.aiter_lines():
                            if line.startswith("data: "):
                                seen.append(json.loads(line[6:]))

            reader = asyncio.create_task(read())
            try:
                await asyncio.wait_for(connected.wait(), WAKE_S)
                r = await stack.api.post(
                    "/v1/messages", json={"text": "Write me a haiku about tea"}, headers=stack.auth
                )
                assert r.status_code == 202, r.text

                async def replied() -> bool:
                    if reader.done():
                        reader.result()  # the stream failed: say how
                    return any(e["type"] == "task.reply" for e in seen)

                # Much longer than the worker needs, much shorter than the poll.
                await eventually(replied, within=60, interval=0.05)
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader

"""Api replicas for tests: `lomo api` processes on one database, each with its own data
directory (so no two share the one-host bell relay), and an SSE reader of `/v1/events`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.helpers import free_port
from tests.runtime_support import ROOT

# Importing the api takes over 20 s on a machine shared with much other work.
START_S = 240.0


@contextlib.contextmanager
def api_replica(tmp: Path, name: str, db_url: str, **env: str) -> Iterator[str]:
    """A `lomo api` process on `db_url`; its base URL once it answers. Its streams' poll is
    two minutes unless `env` says otherwise, so a prompt event came by a wake-up."""
    port = free_port()
    data = tmp / name
    data.mkdir()
    full = dict(
        os.environ,
        LOMO_DATABASE_URL=db_url,
        LOMO_API_PORT=str(port),
        LOMO_SSE_POLL_SECONDS="120",
        LOMO_MODEL_PROVIDER="offline",
        LOMO_HANDOFF_RELAY_SECONDS="0",
        LOMO_TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}",
        **env,
    )
    log = tmp / f"{name}.log"
    proc = subprocess.Popen(
        # The database is migrated already (one process migrates, the replicas serve).
        [sys.executable, "-m", "cli.main", "api", "--data-dir", str(data), "--no-migrate"],
        env=full,
        cwd=ROOT,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _until_alive(proc, url, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _until_alive(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise AssertionError(f"the api replica did not start:\n{log.read_text()[-3000:]}")


class SseReader:
    """Reads `/v1/events` of one person in the background; `seqs` in arrival order."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.seqs: list[int] = []
        self.open = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> SseReader:
        self._task = asyncio.create_task(self._read())
        await asyncio.wait_for(self.open.wait(), 30)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _read(self) -> None:
        timeout = httpx.Timeout(10.0, read=None)
        headers = {"Authorization": f"Bearer {self.token}"}
        async with (
            httpx.AsyncClient(timeout=timeout) as http,
            http.stream("GET", f"{self.url}/v1/events", headers=headers) as r,
        ):
            assert r.status_code == 200
            self.open.set()
            async for line in r.aiter_lines():
                if line.startswith("id: "):
                    self.seqs.append(int(line[4:]))

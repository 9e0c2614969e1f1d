"""Plumbing shared by the benches: a dev server, fresh databases, percentiles, tables."""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import httpx
import psycopg
from temporalio.client import Client

from lomo.temporal import start_dev_server

# Ports from the last slice of tests/helpers.free_port, which test runs (gw0..gw2) do not
# walk: a bench beside someone's pytest run must not race it for the same port.
os.environ.setdefault("PYTEST_XDIST_WORKER", "gw7")
from tests.helpers import free_port

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
ROOT = Path(__file__).resolve().parent.parent


def fresh_pg(prefix: str = "lomo_b") -> tuple[str, str]:
    """A new empty Postgres database: (libpq url, SQLAlchemy url)."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN.rsplit("/", 1)[0]
    return f"{base}/{name}", f"{base.replace('postgresql://', 'postgresql+psycopg://')}/{name}"


def drop_pg(url: str) -> None:
    """Drop a database `fresh_pg` made, once its run is done (FORCE: a lingering connection
    of the run's processes does not keep it)."""
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def dev_server(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The embedded stack's dev server: a SQLite file with WAL (lomo/temporal.py)."""
    port = free_port()
    proc = start_dev_server(tmp / "temporal.db", "127.0.0.1", port, None, tmp / "temporal.log")
    return proc, f"127.0.0.1:{port}"


async def connect(address: str, **kw: object) -> Client:
    for _ in range(150):
        try:
            return await Client.connect(address, **kw)
        except RuntimeError:
            await asyncio.sleep(0.2)
    raise RuntimeError("temporal did not start")


def machine() -> str:
    """Where a table was measured: cores and the load other processes put on them."""
    load = os.getloadavg()[0]
    return f"{os.cpu_count()} cores, load average {load:.1f} (1 min) at the end"


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of milliseconds."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    k = max(0, min(len(xs) - 1, round(p / 100 * len(xs) + 0.5) - 1))
    return xs[k]


def row(name: str, ms: Sequence[float], extra: str = "") -> str:
    return (
        f"| {name} | {len(ms)} | {pct(ms, 50):.1f} | {pct(ms, 99):.1f} | "
        f"{statistics.fmean(ms):.1f} | {extra} |"
    )


HEADER = "| system | n | p50 ms | p99 ms | mean ms | note |\n|---|---|---|---|---|---|"


class Embedded:
    """The embedded stack as `lomo up` runs it, minus the supervisor: the dev server on a
    SQLite file, the SQLite DB, the api and (optionally) a worker as their own processes."""

    def __init__(self, tmp: Path, worker: bool = True, **env: str) -> None:
        self.tmp, self.with_worker, self.extra = tmp, worker, env
        self.procs: list[subprocess.Popen[bytes]] = []
        self.parts = ["temporal", "api", "worker"] if worker else ["temporal", "api"]
        self.db_url = f"sqlite+aiosqlite:///{tmp / 'lomo.db'}"
        self.api_url = ""

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOMO_")}
        env.update(
            LOMO_DATA_DIR=str(self.tmp),
            LOMO_DATABASE_URL=self.db_url,
            LOMO_TEMPORAL_ADDRESS=self.address,
            LOMO_API_PORT=str(self.api_port),
            LOMO_MODEL_PROVIDER="offline",
            LOMO_WORKER_METRICS_PORT="0",
        )
        env.update(self.extra)  # may replace the defaults above (another model provider)
        return env

    def __enter__(self) -> Embedded:
        from lomo.db.migrate import upgrade

        server, self.address = dev_server(self.tmp)
        self.procs.append(server)
        asyncio.run(connect(self.address))  # the api connects lazily: Temporal first
        upgrade(self.db_url)
        self.api_port = free_port()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        for cmd in (["api"], ["worker"]) if self.with_worker else (["api"],):
            log = (self.tmp / f"{cmd[0]}.log").open("ab")
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "cli.main", *cmd],
                    cwd=ROOT,
                    env=self.env(),
                    stdout=log,
                    stderr=log,
                )
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.api_url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise RuntimeError("the api did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()

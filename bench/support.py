"""Plumbing shared by the benches: a dev server, fresh databases, percentiles, tables."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path

import psycopg
from temporalio.client import Client

from lomo.temporal import start_dev_server
from tests.helpers import free_port

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def fresh_pg(prefix: str = "lomo_b") -> tuple[str, str]:
    """A new empty Postgres database: (libpq url, SQLAlchemy url)."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN.rsplit("/", 1)[0]
    return f"{base}/{name}", f"{base.replace('postgresql://', 'postgresql+psycopg://')}/{name}"


def dev_server(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The embedded stack's dev server: a SQLite file with WAL (lomo/temporal.py)."""
    port = free_port()
    proc = start_dev_server(tmp / "temporal.db", "127.0.0.1", port, None, tmp / "temporal.log")
    return proc, f"127.0.0.1:{port}"


async def connect(address: str, **kw: object) -> Client:
    for _ in range(150):
        try:
            return await Client.connect(address, **kw)  # type: ignore[arg-type]
        except RuntimeError:
            await asyncio.sleep(0.2)
    raise RuntimeError("temporal did not start")


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

"""`lomo migrate`: the deployments' one-shot job, against a real database and a real
Temporal dev server that has none of Lomo's search attributes yet."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lomo.temporal import SEARCH_ATTRIBUTES, temporal_binary
from tests.helpers import free_port

pytestmark = pytest.mark.slow


def _bare_dev_server(port: int, log: Path) -> subprocess.Popen[bytes]:
    """A dev server as a fresh Temporal cluster is: no custom search attributes."""
    cmd = [temporal_binary(), "server", "start-dev", "--headless", "--ip", "127.0.0.1"]
    cmd += ["--port", str(port), "--namespace", "default", "--log-level", "warn"]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(log.read_text()[-2000:])


def _listed(port: int) -> str:
    return subprocess.run(
        [temporal_binary(), "operator", "search-attribute", "list", "--address",
         f"127.0.0.1:{port}", "--namespace", "default"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def test_migrate_creates_the_schema_and_the_search_attributes(tmp_path: Path) -> None:
    port = free_port()
    server = _bare_dev_server(port, tmp_path / "temporal.log")
    env = dict(os.environ, LOMO_TEMPORAL_ADDRESS=f"127.0.0.1:{port}")
    lomo = [sys.executable, "-m", "cli.main", "migrate", "--data-dir", str(tmp_path / "d")]
    try:
        assert "LomoTaskStatus" not in _listed(port)
        first = subprocess.run([*lomo, "--search-attributes"], env=env, capture_output=True,
                               text=True, timeout=120)  # fmt: skip
        assert first.returncode == 0, first.stderr[-2000:]
        assert "database at the current schema" in first.stdout
        for name in SEARCH_ATTRIBUTES:
            assert name in first.stdout, first.stdout
        listed = _listed(port)
        for name in SEARCH_ATTRIBUTES:
            assert name in listed, listed
        # Again: nothing is missing, nothing fails.
        again = subprocess.run([*lomo, "--search-attributes"], env=env, capture_output=True,
                               text=True, timeout=120)  # fmt: skip
        assert again.returncode == 0 and "none missing" in again.stdout, again.stdout
    finally:
        server.terminate()
        server.wait(timeout=15)
    assert (tmp_path / "d" / "lomo.db").is_file()

"""The embedded stack a scenario drives: `lomo up` in its own data directory on its own
ports, the offline model, a fast simulator, short workflow timers, and the test-only
clock file through which simulated days pass (lomo/clock.py). Optionally on a private
PostgreSQL cluster that the harness owns, so a fault can restart it without touching the
machine's shared server."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

# Below the ephemeral range, so no dev server's random port takes ours, and below the
# slices tests/helpers hands out (20000-32000), so a run beside the test suite is safe.
PORT_RANGE = (12000, 19000)
PARTS = ("api", "temporal", "temporal_ui", "sim", "memory")
DAY = 86400.0


class StackError(RuntimeError):
    """The stack did not start or stop as it should."""


def free_port(rng: random.Random) -> int:
    for _ in range(200):
        port = rng.randrange(*PORT_RANGE)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise StackError("no free port")


def stack_env(data_dir: Path, ports: dict[str, int], database_url: str | None) -> dict[str, str]:
    env = dict(
        os.environ,
        LOMO_API_PORT=str(ports["api"]),
        LOMO_TEMPORAL_PORT=str(ports["temporal"]),
        LOMO_TEMPORAL_UI_PORT=str(ports["temporal_ui"]),
        LOMO_SIM_PORT=str(ports["sim"]),
        LOMO_MEMORY_PORT=str(ports["memory"]),
        LOMO_SIM_SPEED="0.05",
        LOMO_MODEL_PROVIDER="offline",
        LOMO_TEST_CLOCK_FILE=str(data_dir / "clock"),
        # Workflow timers run on the dev server's real clock (it cannot skip time): short,
        # so every timer that would fire during a simulated gap fires during the person's
        # wait. A dead worker's call is retried within seconds, a lost callback polled.
        LOMO_HEARTBEAT_TIMEOUT_SECONDS="3",
        LOMO_GENERATION_WAIT_SECONDS="4",
        LOMO_CARD_WAIT_SECONDS="15",
        LOMO_RESTART_INITIAL_SECONDS="0.3",
        LOMO_RESTART_MAX_SECONDS="3",
        LOMO_RESTART_RESET_SECONDS="20",
        LOMO_MEMORY_TIMEOUT_SECONDS="10",
    )
    for name in ("LOMO_DATA_DIR", "LOMO_DATABASE_URL", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    if database_url:
        env["LOMO_DATABASE_URL"] = database_url
    return env


@dataclass
class PrivatePostgres:
    """A throwaway PostgreSQL cluster in the data dir (run as the `postgres` OS user when
    the harness is root, since initdb refuses root)."""

    root: Path
    port: int
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.root.parent / "postgres.log"

    def _run(self, *cmd: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        r = subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise StackError(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")

    def start(self) -> str:
        if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
            raise StackError("initdb/pg_ctl not found: the Postgres configuration needs them")
        if not (self.root / "PG_VERSION").exists():
            self.root.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(self.root, "postgres")
                shutil.chown(self.root.parent, "postgres")
            self._run("initdb", "-D", str(self.root), "-A", "trust", "-U", "postgres")
        self._pg_ctl("start")
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _pg_ctl(self, action: str, *extra: str) -> None:
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        self._run(
            "pg_ctl", "-D", str(self.root), "-l", str(self.log), "-o", opts, "-w", action, *extra
        )

    def restart(self) -> None:
        """A crash, not a clean shutdown: every connection breaks mid-transaction."""
        self._run("pg_ctl", "-D", str(self.root), "-m", "immediate", "-w", "stop")
        self._pg_ctl("start")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.root), "-m", "fast", "-w", "stop")
        except StackError:
            pass  # already stopped


@dataclass
class Stack:
    data_dir: Path
    proc: subprocess.Popen[bytes]
    info: dict[str, Any]
    postgres: PrivatePostgres | None = None
    env: dict[str, str] = field(default_factory=dict)  # the stack's environment
    users: dict[str, str] = field(default_factory=dict)  # token → user id
    # The simulator setting a story's scene needs (a slow vendor): fault spells add to it
    # and end back in it, instead of wiping it (scenarios/faults.py).
    scene: dict[str, Any] = field(default_factory=dict)

    @property
    def api_url(self) -> str:
        return str(self.info["api_url"])

    @property
    def sim_url(self) -> str:
        return str(self.info["sim_url"])

    @property
    def sim_auth(self) -> dict[str, str]:
        """The simulator's own token: its fault endpoints refuse a call without it."""
        return {"Authorization": f"Bearer {self.info['sim_token']}"}

    def pids(self) -> dict[str, int]:
        """The children's current pids (a restarted child has a new one)."""
        try:
            return dict(json.loads((self.data_dir / "stack.json").read_text())["pids"])
        except (OSError, ValueError, KeyError):
            return {}

    def restarts(self) -> dict[str, int]:
        try:
            return dict(json.loads((self.data_dir / "stack.json").read_text())["restarts"])
        except (OSError, ValueError, KeyError):
            return {}

    # -- simulated time -----------------------------------------------------------------
    def clock_offset(self) -> float:
        try:
            return float((self.data_dir / "clock").read_text() or 0)
        except (OSError, ValueError):
            return 0.0

    def days_pass(self, days: float) -> None:
        path = self.data_dir / "clock"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(str(self.clock_offset() + days * DAY))
        tmp.replace(path)  # every process reads a whole number, never half a write

    def new_person(self, name: str) -> str:
        r = httpx.post(
            f"{self.api_url}/v1/admin/users",
            json={"name": name},
            headers={"Authorization": f"Bearer {self.info['admin_token']}"},
            timeout=30,
        )
        if r.status_code != 201:
            raise StackError(f"cannot create a person: {r.status_code} {r.text}")
        token = str(r.json()["token"])
        self.users[token] = str(r.json()["user_id"])
        return token

    def memory_vectors(self, user_id: str, texts: list[str]) -> list[dict[str, Any]]:
        return memory_vectors(self.data_dir, self.env, user_id, texts)


def memory_vectors(
    data_dir: Path, env: dict[str, str], user_id: str, texts: list[str]
) -> list[dict[str, Any]]:
    """The person's memory-index points nearest to each text, through the operator's read
    path (`lomo memory-vectors`), which opens the index as the worker does. The embedded
    index belongs to the worker: call this only once the stack is stopped."""
    cmd = [sys.executable, "-m", "cli.main", "memory-vectors", "--user", user_id]
    r = subprocess.run(
        [*cmd, "--data-dir", str(data_dir), *texts],
        env=env or None,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        raise StackError(f"lomo memory-vectors: {r.stderr.strip()[-500:]}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def start(
    data_dir: Path, postgres: bool = False, seed: int = 0, ports: dict[str, int] | None = None
) -> Stack:
    """`ports` (api, temporal, temporal_ui, sim, postgres) default to free ones."""
    rng = random.Random(seed ^ os.getpid())
    data_dir.mkdir(parents=True, exist_ok=True)
    ports = ports or {k: free_port(rng) for k in (*PARTS, "postgres")}
    pg = PrivatePostgres(data_dir.parent / f"{data_dir.name}-pg" / "data", ports["postgres"])
    url = pg.start() if postgres else None
    log = data_dir.parent / f"{data_dir.name}-lomo-up.log"
    env = stack_env(data_dir, ports, url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "up", "--data-dir", str(data_dir)],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    stack_file = data_dir / "stack.json"
    deadline = time.monotonic() + 180
    while not stack_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            if postgres:
                pg.stop()
            raise StackError(f"lomo up did not become ready; see {log}")
        time.sleep(0.3)
    info = json.loads(stack_file.read_text())
    return Stack(data_dir, proc, info, pg if postgres else None, env)


def stop(stack: Stack) -> None:
    stack.proc.send_signal(signal.SIGTERM)
    try:
        stack.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        stack.proc.kill()
        stack.proc.wait(timeout=30)
    if stack.postgres is not None:
        stack.postgres.stop()

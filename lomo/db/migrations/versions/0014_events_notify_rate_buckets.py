"""events announced with NOTIFY; shared rate buckets

Postgres: a trigger on `events` sends `NOTIFY lomo_events, '<user id> <seq>'` in the
transaction that inserts the row, so every api replica's listener hears of every event at
its commit, whatever path wrote it (docs/architecture.md#events). Both databases: one row
per rate-limit key, shared by the api replicas (api/ratelimit.py).

Revision ID: 0014
Revises: 0013
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FUNCTION = """
CREATE OR REPLACE FUNCTION lomo_event_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('lomo_events', NEW.user_id || ' ' || NEW.seq);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
_TRIGGER = """
CREATE TRIGGER events_notify AFTER INSERT ON events
FOR EACH ROW EXECUTE FUNCTION lomo_event_notify()
"""


def upgrade() -> None:
    op.create_table(
        "rate_buckets",
        sa.Column("key", sa.String(100), primary_key=True),
        # The bucket's theoretical arrival time (seconds since the epoch, database clock).
        sa.Column("tat", sa.Float(precision=53), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION)
        op.execute(_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS events_notify ON events")
        op.execute("DROP FUNCTION IF EXISTS lomo_event_notify()")
    op.drop_table("rate_buckets")

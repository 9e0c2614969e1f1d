"""message hand-off (a stored message's hand-over to Temporal is recorded; a relay finishes
the ones a failed hand-off left behind)

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("handed_at", sa.DateTime(timezone=True), nullable=True))
    # Messages from before this revision were handed over by the request that stored them
    # (or by its client's retry); the relay must not send years of history again.
    op.execute("UPDATE messages SET handed_at = created_at")
    op.create_index("ix_messages_handed_at", "messages", ["handed_at"])


def downgrade() -> None:
    op.drop_index("ix_messages_handed_at", "messages")
    op.drop_column("messages", "handed_at")

"""card hand-off (an answered card's hand-offs to Temporal are recorded; the relay finishes
the ones a failed or timed-out hand-off left behind)

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("cards", sa.Column("handed_at", sa.DateTime(timezone=True), nullable=True))
    # Cards answered before this revision were handed on by the request that stored the
    # answer (or its client's retry); the relay must not send their hand-offs again.
    op.execute("UPDATE cards SET handed_at = answered_at WHERE answered_at IS NOT NULL")
    op.create_index("ix_cards_handed_at", "cards", ["handed_at"])


def downgrade() -> None:
    op.drop_index("ix_cards_handed_at", "cards")
    op.drop_column("cards", "handed_at")

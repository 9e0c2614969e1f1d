"""a message's read, withdrawn and moved marks

`read_at` is set when a model step takes the message (before the model sees it), in a
conditional write that a withdrawal or a move, conditional in turn on `read_at` being
unset, excludes: of the two racing, exactly one changes the row. `moved_to` names the
copy a move made in the other task; `moved_from` the message it was moved from.

Revision ID: 0016
Revises: 0015
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as t:
        t.add_column(sa.Column("read_at", sa.DateTime(timezone=True), nullable=True))
        t.add_column(sa.Column("withdrawn_at", sa.DateTime(timezone=True), nullable=True))
        t.add_column(sa.Column("moved_to", sa.String(40), nullable=True))
        t.add_column(sa.Column("moved_from", sa.String(40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages") as t:
        for name in ("moved_from", "moved_to", "withdrawn_at", "read_at"):
            t.drop_column(name)

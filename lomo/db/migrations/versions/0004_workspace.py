"""workspace (edits, notices, deletion)

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("objects", schema=None) as batch_op:
        batch_op.add_column(sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("object_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("call_id", sa.String(length=120), nullable=True))
        batch_op.add_column(sa.Column("summary", sa.Text(), nullable=False, server_default=""))
        batch_op.create_unique_constraint("uq_object_versions_call_id", ["call_id"])
    with op.batch_alter_table("task_objects", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("deletion_seen", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("task_objects", schema=None) as batch_op:
        batch_op.drop_column("deletion_seen")
    with op.batch_alter_table("object_versions", schema=None) as batch_op:
        batch_op.drop_constraint("uq_object_versions_call_id", type_="unique")
        batch_op.drop_column("summary")
        batch_op.drop_column("call_id")
    with op.batch_alter_table("objects", schema=None) as batch_op:
        batch_op.drop_column("deleted_at")

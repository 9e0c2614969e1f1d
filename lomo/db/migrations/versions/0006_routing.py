"""routing (the task index)

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "task_index",
        sa.Column("task_id", sa.String(40), sa.ForeignKey("tasks.id"), primary_key=True),
        sa.Column("user_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("status", sa.String(30), nullable=False),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("language", sa.String(8), nullable=False),
        sa.Column("object_refs", sa.JSON(), nullable=False),
        sa.Column("keywords", sa.Text(), nullable=False),
        sa.Column("vector_id", sa.String(60), nullable=True),
        sa.Column("source_updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_active_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("refreshed_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_task_index_user_active", "task_index", ["user_id", "last_active_at"])
    op.create_table(
        "task_index_terms",
        sa.Column(
            "task_id",
            sa.String(40),
            sa.ForeignKey("task_index.task_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("term", sa.String(60), primary_key=True),
        sa.Column("user_id", sa.String(40), nullable=False),
    )
    op.create_index("ix_task_index_terms_user_term", "task_index_terms", ["user_id", "term"])
    op.create_table(
        "routing_records",
        sa.Column("key", sa.String(60), primary_key=True),
        sa.Column("user_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("message_id", sa.String(40), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("candidates", sa.JSON(), nullable=False),
        sa.Column("model_calls", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_routing_records_user_id", "routing_records", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_routing_records_user_id", table_name="routing_records")
    op.drop_table("routing_records")
    op.drop_index("ix_task_index_terms_user_term", table_name="task_index_terms")
    op.drop_table("task_index_terms")
    op.drop_index("ix_task_index_user_active", table_name="task_index")
    op.drop_table("task_index")

"""context (tool outputs outside the context, segment summaries)

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_outputs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("user_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("task_id", sa.String(40), nullable=False),
        sa.Column("call_id", sa.String(120), nullable=False, unique=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_tool_outputs_user_id", "tool_outputs", ["user_id"])
    op.create_index("ix_tool_outputs_task_id", "tool_outputs", ["task_id"])
    op.create_table(
        "context_segments",
        sa.Column("id", sa.String(80), primary_key=True),
        sa.Column("user_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("task_id", sa.String(40), nullable=False),
        sa.Column("segment", sa.Integer(), nullable=False),
        sa.Column("first_step", sa.Integer(), nullable=False),
        sa.Column("last_step", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("message_ids", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_context_segments_user_id", "context_segments", ["user_id"])
    op.create_index("ix_context_segments_task_id", "context_segments", ["task_id"])


def downgrade() -> None:
    op.drop_table("context_segments")
    op.drop_table("tool_outputs")

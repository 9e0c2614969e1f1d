"""nudges: the person's quiet hours and each task's nudging

Quiet hours are wall-clock times in the person's time zone; a task's row says whether it
may remind the person, how many reminders went unanswered and when the last went out
(nudges/).

Revision ID: 0018
Revises: 0017
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "quiet_hours",
        sa.Column("user_id", sa.String(length=40), sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("start", sa.String(length=8), nullable=False),
        sa.Column("end", sa.String(length=8), nullable=False),
        sa.Column("time_zone", sa.String(length=64), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "task_nudges",
        sa.Column("task_id", sa.String(length=40), sa.ForeignKey("tasks.id"), primary_key=True),
        sa.Column("user_id", sa.String(length=40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("ignored", sa.Integer(), nullable=False),
        sa.Column("last_nudge_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_task_nudges_user_id", "task_nudges", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_task_nudges_user_id", "task_nudges")
    op.drop_table("task_nudges")
    op.drop_table("quiet_hours")

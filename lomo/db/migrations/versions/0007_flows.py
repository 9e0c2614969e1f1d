"""flows (runs, their nodes, the result cache)

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "flow_runs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("user_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("flow_id", sa.String(40), nullable=False),
        sa.Column("task_id", sa.String(40), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("total_nodes", sa.Integer(), nullable=False),
        sa.Column("price_cents", sa.Integer(), nullable=False),
        sa.Column("card_id", sa.String(40), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_flow_runs_user_id", "flow_runs", ["user_id"])
    op.create_index("ix_flow_runs_flow_id", "flow_runs", ["flow_id"])
    op.create_index("ix_flow_runs_task_id", "flow_runs", ["task_id"])
    op.create_table(
        "flow_run_nodes",
        sa.Column("run_id", sa.String(40), sa.ForeignKey("flow_runs.id"), primary_key=True),
        sa.Column("node_id", sa.String(40), primary_key=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("hash", sa.String(64), nullable=True),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("order_id", sa.String(40), nullable=True),
        sa.Column("object_id", sa.String(40), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("stale", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "flow_results",
        sa.Column("flow_id", sa.String(40), primary_key=True),
        sa.Column("node_id", sa.String(40), primary_key=True),
        sa.Column("hash", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("object_id", sa.String(40), nullable=False),
        sa.Column("order_id", sa.String(40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_flow_results_user_id", "flow_results", ["user_id"])


def downgrade() -> None:
    op.drop_table("flow_results")
    op.drop_table("flow_run_nodes")
    op.drop_table("flow_runs")

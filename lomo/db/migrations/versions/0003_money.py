"""money (ledger, budget, approvals)

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "money_accounts",
        sa.Column("user_id", sa.String(length=40), sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("balance_cents", sa.Integer(), nullable=False),
        sa.Column("reserved_cents", sa.Integer(), nullable=False),
        sa.Column("spent_cents", sa.Integer(), nullable=False),
        sa.Column("deposits_cents", sa.Integer(), nullable=False),
        _ts("updated_at"),
    )
    op.create_table(
        "ledger_entries",
        sa.Column("id", sa.Integer(), autoincrement=True, primary_key=True),
        sa.Column("user_id", sa.String(length=40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("amount_cents", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=160), nullable=False),
        sa.Column("order_id", sa.String(length=40), nullable=True),
        sa.Column("task_id", sa.String(length=40), nullable=True),
        sa.Column("grant", sa.String(length=12), nullable=True),
        _ts("created_at"),
        sa.UniqueConstraint("user_id", "kind", "key"),
    )
    op.create_index("ix_ledger_entries_user_id", "ledger_entries", ["user_id"])
    op.create_table(
        "budget_settings",
        sa.Column("user_id", sa.String(length=40), sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("free_confirm_cents", sa.Integer(), nullable=False),
        sa.Column("daily_free_cents", sa.Integer(), nullable=False),
        _ts("updated_at"),
    )
    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), autoincrement=True, primary_key=True),
        sa.Column("user_id", sa.String(length=40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("task_id", sa.String(length=40), nullable=True),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("key", sa.String(length=160), nullable=False),
        sa.Column("amount_cents", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=10), nullable=False),
        sa.Column("card_id", sa.String(length=40), nullable=True),
        _ts("created_at"),
        sa.UniqueConstraint("user_id", "key"),
    )
    op.create_index("ix_approvals_user_id", "approvals", ["user_id"])
    op.create_index("ix_approvals_task_id", "approvals", ["task_id"])
    op.create_table(
        "plan_budgets",
        sa.Column("task_id", sa.String(length=40), primary_key=True),
        sa.Column("user_id", sa.String(length=40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("approved_cents", sa.Integer(), nullable=False),
        _ts("updated_at"),
    )
    op.create_index("ix_plan_budgets_user_id", "plan_budgets", ["user_id"])
    op.create_table(
        "task_autonomy",
        sa.Column("task_id", sa.String(length=40), primary_key=True),
        sa.Column("user_id", sa.String(length=40), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("level", sa.String(length=20), nullable=False),
        _ts("updated_at"),
    )
    op.create_index("ix_task_autonomy_user_id", "task_autonomy", ["user_id"])
    with op.batch_alter_table("generation_orders") as b:
        b.add_column(sa.Column("price_cents", sa.Integer(), nullable=False, server_default="0"))
        b.add_column(_ts("submit_started_at", nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("generation_orders") as b:
        b.drop_column("submit_started_at")
        b.drop_column("price_cents")
    for table in (
        "task_autonomy",
        "plan_budgets",
        "approvals",
        "budget_settings",
        "ledger_entries",
        "money_accounts",
    ):
        op.drop_table(table)

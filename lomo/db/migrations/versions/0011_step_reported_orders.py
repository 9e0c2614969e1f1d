"""a step's reported jobs in a column of their own

Every model step reads which finished jobs earlier steps were shown. Read out of each
step's stored context (a JSON document holding the whole text the step was sent), Postgres
would parse every earlier step's context on every step: 10 ms at 200 steps, growing with
the task. Only the steps that were shown a job have a value (NULL otherwise).

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("model_steps", sa.Column("reported_orders", sa.JSON(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "UPDATE model_steps SET reported_orders = context -> 'reported_orders'"
            " WHERE json_array_length(context -> 'reported_orders') > 0"
        )
    else:
        op.execute(
            "UPDATE model_steps SET reported_orders = json_extract(context, '$.reported_orders')"
            " WHERE json_array_length(context, '$.reported_orders') > 0"
        )


def downgrade() -> None:
    op.drop_column("model_steps", "reported_orders")

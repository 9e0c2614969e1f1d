"""a flow run node's basis: what its content hash covered

Digests of the node's own definition and of what it took from each input (a node input's
hash, or the parts of a document it names). A later run compares it with the node's basis
then, to tell the person why the node is made again.

Revision ID: 0017
Revises: 0016
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("flow_run_nodes") as t:
        t.add_column(sa.Column("basis", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("flow_run_nodes") as t:
        t.drop_column("basis")

"""a task's status fence

The workflow's status writes carry its workflow time as a fencing token. A worker that
was frozen in a workflow task and resumes after another worker redid that task must not
set an older status over a newer one (a completed task back to waiting, say): the write
applies only when its token is not older than the stored one.

Revision ID: 0013
Revises: 0012
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("tasks", sa.Column("status_fence", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("tasks", "status_fence")

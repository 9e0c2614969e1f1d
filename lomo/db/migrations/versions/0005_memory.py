"""memory (evidence, memories, versions)

Revision ID: 0005
Revises: 0004
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TZ = sa.DateTime(timezone=True)


def _user() -> sa.Column[str]:
    return sa.Column("user_id", sa.String(40), sa.ForeignKey("users.id"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "memory_evidence",
        sa.Column("id", sa.String(40), primary_key=True),
        _user(),
        sa.Column("source", sa.String(20), nullable=False),
        sa.Column("source_ref", sa.String(80), nullable=False),
        sa.Column("message_id", sa.String(40), nullable=True),
        sa.Column("task_id", sa.String(40), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("usable", sa.Boolean(), nullable=False),
        sa.Column("candidates", sa.JSON(), nullable=False),
        sa.Column("extracted_at", _TZ, nullable=True),
        sa.Column("forgotten_at", _TZ, nullable=True),
        sa.Column("created_at", _TZ, nullable=False),
        sa.UniqueConstraint("user_id", "source", "source_ref"),
    )
    op.create_index("ix_memory_evidence_user_id", "memory_evidence", ["user_id"])
    op.create_index("ix_memory_evidence_message_id", "memory_evidence", ["message_id"])
    op.create_table(
        "memories",
        sa.Column("id", sa.String(40), primary_key=True),
        _user(),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("scope", sa.String(10), nullable=False),
        sa.Column("task_id", sa.String(40), nullable=True),
        sa.Column("subject", sa.String(120), nullable=False),
        sa.Column("attribute", sa.String(120), nullable=False),
        sa.Column("current_version", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("updated_at", _TZ, nullable=False),
    )
    op.create_index("ix_memories_user_id", "memories", ["user_id"])
    op.create_index("ix_memories_user_key", "memories", ["user_id", "subject", "attribute"])
    op.create_table(
        "memory_versions",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("memory_id", sa.String(40), sa.ForeignKey("memories.id"), nullable=False),
        _user(),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("relation", sa.String(10), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("valid_from", _TZ, nullable=False),
        sa.Column("valid_to", _TZ, nullable=True),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("deleted_at", _TZ, nullable=True),
        sa.UniqueConstraint("memory_id", "version"),
    )
    op.create_index("ix_memory_versions_memory_id", "memory_versions", ["memory_id"])
    op.create_index("ix_memory_versions_user_id", "memory_versions", ["user_id"])
    op.create_index("ix_memory_versions_user_status", "memory_versions", ["user_id", "status"])
    op.create_table(
        "memory_links",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        _user(),
        sa.Column("source_kind", sa.String(10), nullable=False),
        sa.Column("source_id", sa.String(40), nullable=False),
        sa.Column("target_kind", sa.String(10), nullable=False),
        sa.Column("target_id", sa.String(40), nullable=False),
        sa.Column("relation", sa.String(10), nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
    )
    for col in ("user_id", "source_id", "target_id"):
        op.create_index(f"ix_memory_links_{col}", "memory_links", [col])
    op.create_table(
        "memory_summaries",
        sa.Column("id", sa.String(40), primary_key=True),
        _user(),
        sa.Column("task_id", sa.String(40), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
    )
    op.create_index("ix_memory_summaries_user_id", "memory_summaries", ["user_id"])
    op.create_index("ix_memory_summaries_task_id", "memory_summaries", ["task_id"])
    op.create_table(
        "memory_profiles",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        _user(),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("items", sa.JSON(), nullable=False),
        sa.Column("reason", sa.String(40), nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
        sa.UniqueConstraint("user_id", "version"),
    )
    op.create_index("ix_memory_profiles_user_id", "memory_profiles", ["user_id"])
    op.create_table(
        "memory_suppressions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        _user(),
        sa.Column("subject", sa.String(120), nullable=False),
        sa.Column("attribute", sa.String(120), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("text_hash", sa.String(64), nullable=False),
        sa.Column("forget_id", sa.String(40), nullable=False),
        sa.Column("lifted_by", sa.String(40), nullable=True),
        sa.Column("created_at", _TZ, nullable=False),
    )
    op.create_index("ix_memory_suppressions_user_id", "memory_suppressions", ["user_id"])
    op.create_table(
        "memory_forgets",
        sa.Column("id", sa.String(40), primary_key=True),
        _user(),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("evidence_ids", sa.JSON(), nullable=False),
        sa.Column("deleted_version_ids", sa.JSON(), nullable=False),
        sa.Column("rederived_version_ids", sa.JSON(), nullable=False),
        sa.Column("profile_version", sa.Integer(), nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
    )
    op.create_index("ix_memory_forgets_user_id", "memory_forgets", ["user_id"])
    op.create_table(
        "memory_usage",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("task_id", sa.String(40), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.String(40), nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
        sa.UniqueConstraint("task_id", "turn", "step", "version_id"),
    )
    op.create_index("ix_memory_usage_task_id", "memory_usage", ["task_id"])
    op.create_index("ix_memory_usage_version_id", "memory_usage", ["version_id"])


def downgrade() -> None:
    for table in (
        "memory_usage",
        "memory_forgets",
        "memory_suppressions",
        "memory_profiles",
        "memory_summaries",
        "memory_links",
        "memory_versions",
        "memories",
        "memory_evidence",
    ):
        op.drop_table(table)

"""Indexes of the slot context: the public showcase, the agent's list, the overlap check.

Built CONCURRENTLY (outside a transaction), so a live calendar keeps booking and
the worker keeps expiring while they build. The partial indexes hold only the
rows their queries read, so an expiry (Available -> Expired) adds no entry to them.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLE = "availability_slots"


def upgrade() -> None:
    with op.get_context().autocommit_block():
        # The showcase: a tenant's Available slots by (start_at, id), keyset-paginated.
        op.create_index(
            "ix_availability_slots_showcase",
            TABLE,
            ["tenant_id", "start_at", "id"],
            postgresql_where=sa.text("status = 'Available'"),
            postgresql_concurrently=True,
        )
        # The agent's list (any status, when asked for) and the showcase for one
        # consultant.
        op.create_index(
            "ix_availability_slots_consultant_start",
            TABLE,
            ["tenant_id", "consultant_id", "start_at", "id"],
            postgresql_concurrently=True,
        )
        # The overlap check of a publication: the consultant's slots that take
        # time and end after the new batch starts (future ones, whatever history).
        op.create_index(
            "ix_availability_slots_consultant_occupied_end",
            TABLE,
            ["tenant_id", "consultant_id", "end_at"],
            postgresql_where=sa.text("status IN ('Available', 'Booked')"),
            postgresql_concurrently=True,
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name in (
            "ix_availability_slots_consultant_occupied_end",
            "ix_availability_slots_consultant_start",
            "ix_availability_slots_showcase",
        ):
            op.drop_index(name, table_name=TABLE, postgresql_concurrently=True)

"""Indexes of the slot context: the public showcase, the agent's list, the overlap check.

Built CONCURRENTLY (outside a transaction), so a live calendar keeps booking and
the worker keeps expiring while they build. The partial indexes hold only the
rows their queries read, so an expiry (Available -> Expired) adds no entry to them.

Not on the calendar's (adopted) table: they serve this repository's slot
context (the `slots` commands, the demo), not the worker, and the calendar
indexes its own queries; three more indexes would cost its every write.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

from slot_expiration.store import migration_context

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLE = "availability_slots"
INDEXES = (
    "ix_availability_slots_consultant_occupied_end",
    "ix_availability_slots_consultant_start",
    "ix_availability_slots_showcase",
)


def upgrade() -> None:
    if migration_context.adopted():
        migration_context.note(
            "not built on the calendar's table: the slot context's indexes (migration "
            "0003, for the `slots` commands, not the worker)"
        )
        return
    with migration_context.concurrently():
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
    if migration_context.adopted():
        return  # never built there; an index of that name would be the calendar's
    with migration_context.concurrently():
        for name in INDEXES:
            op.drop_index(name, table_name=TABLE, postgresql_concurrently=True)

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

from slot_expiration.schema import migration_context

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLE = "availability_slots"


# Each index: its columns and, if partial, the rows it holds.
SHAPES: dict[str, tuple[list[str], str | None]] = {
    # The showcase: a tenant's Available slots by (start_at, id), keyset-paginated.
    "ix_availability_slots_showcase": (["tenant_id", "start_at", "id"], "status = 'Available'"),
    # The agent's list (any status, when asked for) and the showcase for one consultant.
    "ix_availability_slots_consultant_start": (
        ["tenant_id", "consultant_id", "start_at", "id"],
        None,
    ),
    # The overlap check of a publication: the consultant's slots that take time and end
    # after the new batch starts (future ones, whatever history).
    "ix_availability_slots_consultant_occupied_end": (
        ["tenant_id", "consultant_id", "end_at"],
        "status IN ('Available', 'Booked')",
    ),
}


def upgrade() -> None:
    if migration_context.adopted():
        if not migration_context.replaying():
            migration_context.note(
                "not built on the calendar's table: the slot context's indexes (migration "
                "0003, for the `slots` commands, not the worker)"
            )
        return
    with migration_context.concurrently():
        for name, (columns, where) in SHAPES.items():
            validity = migration_context.index_validity(name)
            if validity:
                continue
            if validity is False:  # a build cut short: it serves nothing
                op.drop_index(name, table_name=TABLE, postgresql_concurrently=True)
            op.create_index(
                name,
                TABLE,
                columns,
                postgresql_where=sa.text(where) if where else None,
                postgresql_concurrently=True,
            )
            migration_context.recreated(f"index {name}")


def downgrade() -> None:
    if migration_context.adopted():
        return  # never built there; an index of that name would be the calendar's
    with migration_context.concurrently():
        for name in reversed(SHAPES):
            op.drop_index(name, table_name=TABLE, postgresql_concurrently=True)

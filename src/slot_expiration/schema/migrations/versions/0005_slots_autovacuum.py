"""Vacuum availability_slots after 2% of it has changed, not PostgreSQL's default 20%.

Every expiry leaves a dead row version behind, and with it dead entries in the
worker's index and the primary key that each batch steps over until a vacuum
removes them. Measured on 10 million slots (docs/benchmarks.md, section e and
the tuning log): with 2,000,000 dead versions (20%, where the default
autovacuum starts) a batch takes 92 ms instead of 36 ms and the first batch
after the wave 8.6 s; with 200,000 (2%) 55 ms and 2.5 s. Setting it takes a
SHARE UPDATE EXCLUSIVE lock: reads and writes go on.

Not on the calendar's (adopted) table: its storage settings are its DBA's to
choose (the calendar's own updates leave dead versions too). migrate says so,
and docs/deploy.md gives the statement to apply by hand.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from alembic import op

from slot_expiration.schema import migration_context

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SETTING = "ALTER TABLE availability_slots SET (autovacuum_vacuum_scale_factor = 0.02)"


def upgrade() -> None:
    if migration_context.adopted():
        if not migration_context.replaying():
            migration_context.note(
                "not applied to the calendar's table (its DBA's to decide, see "
                f"docs/deploy.md): {SETTING}"
            )
        return
    if migration_context.slot_table_autovacuum_set():
        return
    op.execute(SETTING)
    migration_context.recreated("the autovacuum setting of availability_slots")


def downgrade() -> None:
    if migration_context.adopted():
        return
    op.execute("ALTER TABLE availability_slots RESET (autovacuum_vacuum_scale_factor)")

"""Which availability_slots the worker adopted: its schema, recorded on the worker's own
version table.

Every statement names availability_slots unqualified, so the session's search_path decides
which table it is. A search_path that changed since `migrate` (a pooler dropping the URL's
`options`, a role's setting altered, a second `availability_slots` created in a schema
earlier on the path) would turn every command to another table, which the worker would then
expire as its own. With the schema recorded here, each session compares the table its
search_path finds with the one adopted (schema/location.py), and refuses another.

`slot_table_schema` holds the schema of the availability_slots this migrate found (or
created). Nullable: NULL on a database migrated by a release before this one until it runs
this migration; a release before this one never writes it, and keeps working (Alembic
writes only `version_num`).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

from slot_expiration.schema import migration_context
from slot_expiration.schema.version import VERSION_TABLE

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

COLUMN = "slot_table_schema"


def upgrade() -> None:
    if migration_context.column_missing(VERSION_TABLE, COLUMN):
        # The worker's own table, a handful of rows: a brief lock that no calendar write
        # waits for.
        op.add_column(VERSION_TABLE, sa.Column(COLUMN, sa.Text(), nullable=True))
        migration_context.recreated(f"column {VERSION_TABLE}.{COLUMN}", part_of=VERSION_TABLE)
    migration_context.record_slot_table_schema()


def downgrade() -> None:
    op.drop_column(VERSION_TABLE, COLUMN)

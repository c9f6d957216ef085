"""${message}

Migrations only add; a release runs on the schema of a newer one. Before writing
this one, read README.md beside the versions folder: no drop, rename or retype of
what an older release uses; indexes CONCURRENTLY in migration_context.concurrently();
leave the calendar's (adopted) table alone (migration_context.adopted()); work
offline too (migrate --sql). Revision ids are consecutive four-digit numbers, and
HEAD_REVISION in store/schema_version.py moves with each new head.

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from alembic import op
import sqlalchemy as sa
${imports if imports else ""}

from slot_expiration.store import migration_context

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}

"""Which schema the worker expects, known without loading Alembic.

Alembic and SQLAlchemy add about 23 MB to a process's resident memory, and
only `migrate` (and the demo and the benchmark, which migrate) need them. The
worker's readiness probe and `status` compare the database's revision with
HEAD_REVISION instead; a unit test holds it equal to the head of the
migrations that Alembic finds, so a new migration cannot forget it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from slot_expiration.store.migrate import MigrationOutcome

# The newest migration in migrations/versions.
HEAD_REVISION: Final = "0006"

# Our own history table: the calendar's database may keep its own `alembic_version`.
VERSION_TABLE: Final = "slot_expiration_alembic_version"


def upgrade(database_url: str) -> MigrationOutcome:
    """Bring the schema to HEAD_REVISION (store.migrate.upgrade, loaded only now)."""
    from slot_expiration.store import migrate  # noqa: PLC0415 - Alembic only when migrating

    return migrate.upgrade(database_url)

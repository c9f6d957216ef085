"""Which schema the worker expects, and where a database's schema stands against it,
known without loading Alembic.

Alembic and SQLAlchemy add about 23 MB to a process's resident memory, and
only `migrate` (and the demo and the benchmark, which migrate) need them. The
worker's readiness probe and `status` compare the database's revision with
HEAD_REVISION instead; a unit test holds it equal to the head of the
migrations that Alembic finds, so a new migration cannot forget it.

Revision ids are consecutive four-digit numbers (0001, 0002, ...; a unit test
holds the chain to it): that is how a release tells a schema *ahead* of it (a
newer release migrated first, rolling deploys and rollbacks) from one it does
not know at all. Migrations only add (migrations/README.md), so a release keeps
working on a schema ahead of it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from slot_expiration.db.session import Session

# The newest migration in migrations/versions.
HEAD_REVISION: Final = "0010"

# Our own history table: the calendar's database may keep its own `alembic_version`.
VERSION_TABLE: Final = "slot_expiration_alembic_version"

_REVISION_DIGITS: Final = 4


class SchemaPosition(StrEnum):
    """Where a database's revision stands against this release's newest."""

    NONE = "none"  # never migrated
    BEHIND = "behind"  # `migrate` brings it to HEAD_REVISION
    CURRENT = "current"
    AHEAD = "ahead"  # a newer release migrated it; this one runs on it unchanged
    UNKNOWN = "unknown"  # not a revision of this product's numbering


async def read_schema_revision(session: Session) -> str | None:
    """The migration the database's schema is at; None when its history table is empty."""
    found = await session.column("schema_revision")
    return str(found[0]) if found else None


def revision_number(revision: str) -> int | None:
    """The number of a revision id ("0005" -> 5); None when it is not one of ours."""
    if len(revision) != _REVISION_DIGITS or not revision.isdigit() or int(revision) == 0:
        return None
    return int(revision)


def position_of(revision: str | None, head: str = HEAD_REVISION) -> SchemaPosition:
    if revision is None:
        return SchemaPosition.NONE
    number, newest = revision_number(revision), revision_number(head)
    if number is None or newest is None:
        return SchemaPosition.UNKNOWN
    if number < newest:
        return SchemaPosition.BEHIND
    return SchemaPosition.CURRENT if number == newest else SchemaPosition.AHEAD


def ahead_of_release(revision: str, head: str = HEAD_REVISION) -> str:
    """What the worker, `status` and /readyz say of a schema a newer release migrated."""
    return f"schema ahead of this release ({revision} > {head})"


def unknown_revision(revision: str) -> str:
    return f"the schema is at revision {revision!r}, which is not a revision of slot-expiration"

"""Where the calendar's availability_slots is, and whether it is the one the worker adopted.

Every statement of the product names availability_slots unqualified: the session's
search_path decides which one it is. So each session that the worker, `status`, `ui`,
`grant`, `quarantine` and `migrate` open asks, in its first transaction, which table its
search_path finds (slot_table_identity, schema.sql) and refuses another than the one
meant: the schema --schema (or the URL's `options`) names, or else the schema `migrate`
recorded when it adopted the table (migration 0008). A pooler that drops the URL's
options, a role's search_path altered, a second availability_slots created earlier on
the path: each is refused in one line naming both tables, before anything is touched.

A command that finds no table at all asks here whether another schema of the database
holds one, to say how to point at it instead of offering `migrate` (which never creates a
second one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from slot_expiration.db.errors import (
    SlotTableElsewhereError,
    StoreError,
    WrongSlotTableError,
    ways_to_point_at,
)
from slot_expiration.db.session import (
    ApplicationName,
    Session,
    connect_sync,
    opening_parameters,
)
from slot_expiration.db.statements import query


@dataclass(frozen=True, slots=True)
class SlotTableIdentity:
    """slot_table_identity's row (schema.sql), and the schema migrate recorded."""

    found_in: str | None
    on_search_path: bool
    schemas_elsewhere: Sequence[str]  # where the search_path finds none: who holds one
    worker_schema: str | None
    records_schema: bool
    worker_schemas_elsewhere: Sequence[str]
    search_path: str
    role: str
    recorded_in: str | None = None

    def elsewhere(self) -> SlotTableElsewhereError | None:
        """Where the search_path finds no availability_slots but another schema holds one:
        the error that says how to point at it (nothing may create a second one)."""
        if self.found_in is not None or not self.schemas_elsewhere:
            return None
        return SlotTableElsewhereError(self.schemas_elsewhere, self.search_path, self.role)

    def refusal(self, *, requested: bool, adopting: bool = False) -> WrongSlotTableError | None:
        """Why this session must not use the availability_slots it finds; None when it is
        the one meant. `requested`: the URL's options name the search_path (--schema),
        which is then what is meant; else the table migrate recorded is. `adopting`:
        migrate, which would adopt a table the worker never adopted."""
        if self.found_in is None:
            return None  # no table on the search_path: elsewhere() or the callers say so
        found = f"{self.found_in}.availability_slots"
        if not self.on_search_path:
            return WrongSlotTableError(
                f"availability_slots is the temporary table {found}, which hides the "
                f"calendar's on the search_path ({self.search_path}): the worker never uses "
                "it; end the session that created it; nothing changed"
            )
        if requested:
            return None  # --schema names the table: the search_path holds only that schema
        if self.recorded_in is not None and self.recorded_in != self.found_in:
            return WrongSlotTableError(
                f"the search_path ({self.search_path}) finds {found}, but migrate adopted "
                f"{self.recorded_in}.availability_slots: "
                f"{ways_to_point_at(self.recorded_in, self.role)}; nothing changed"
            )
        if self.worker_schema is None and self.worker_schemas_elsewhere:
            (schema, *_) = self.worker_schemas_elsewhere
            adopt = (
                f"; to adopt {found} as a calendar of its own, run migrate with "
                f"--schema {self.found_in}"
                if adopting
                else ""
            )
            return WrongSlotTableError(
                f"the search_path ({self.search_path}) finds {found}, which migrate never "
                f"adopted: the worker's tables are in schema {schema}, beside the calendar it "
                f"adopted: {ways_to_point_at(schema, self.role)}{adopt}; nothing changed"
            )
        return None


async def slot_table_identity(session: Session) -> SlotTableIdentity:
    """Which availability_slots the session finds, and the schema migrate recorded."""
    found = await session.record("slot_table_identity", SlotTableIdentity)
    if not found.records_schema:
        return found
    recorded = await session.column("slot_table_recorded")
    return _with_recorded(found, recorded)


async def verify_slot_table(session: Session) -> SlotTableIdentity:
    """Refuse an availability_slots other than the one meant (WrongSlotTableError), or
    none on the search_path where another schema holds one (SlotTableElsewhereError); run
    in the first transaction of a session, before anything reads or writes the table."""
    found = await slot_table_identity(session)
    if refusal := found.refusal(requested=session.search_path_requested) or found.elsewhere():
        raise refusal
    return found


def _with_recorded(found: SlotTableIdentity, recorded: Sequence[str | None]) -> SlotTableIdentity:
    return SlotTableIdentity(
        found_in=found.found_in,
        on_search_path=found.on_search_path,
        schemas_elsewhere=found.schemas_elsewhere,
        worker_schema=found.worker_schema,
        records_schema=found.records_schema,
        worker_schemas_elsewhere=found.worker_schemas_elsewhere,
        search_path=found.search_path,
        role=found.role,
        recorded_in=recorded[0] if recorded else None,
    )


def slot_table_elsewhere(database_url: str) -> SlotTableElsewhereError | None:
    """The schemas holding the availability_slots the search_path misses, as the error
    that says how to point at them; None when there is none (or it cannot be told: the
    caller's own error stands then)."""
    try:
        with connect_sync(database_url, ApplicationName.ADMIN) as session:
            session.execute(query("transaction_settings"), opening_parameters(database_url))
            found = session.execute(query("slot_table_elsewhere")).fetchone()
    except (StoreError, psycopg.Error):
        return None
    if found is None or not found[0]:
        return None
    schemas, search_path, role = found
    return SlotTableElsewhereError(schemas, search_path, role)

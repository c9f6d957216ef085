"""The calendar's own availability_slots, as production has it before the worker comes,
and a snapshot of everything of it that `migrate` must leave as it was.

The table fits the contract and carries what a real calendar's table would:
more columns, its own CHECK and UNIQUE constraints, a trigger, a table that
references it (a foreign key, with its internal triggers on this table), its
own indexes, grants (table and column), a storage option and a comment. This
SQL belongs to the tests (arranging and inspecting); the product's own lives in
slot_expiration/*/*.sql (each concern beside its code).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import psycopg

SELECTION_INDEX = "ix_availability_slots_status_start"

CALENDAR_TABLE = """
CREATE TABLE availability_slots (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL,
    consultant_id uuid NOT NULL,
    start_at timestamptz NOT NULL,
    end_at timestamptz NOT NULL,
    status text NOT NULL
        CONSTRAINT availability_slots_status_check
        CHECK (status IN ('Available', 'Booked', 'Expired', 'Archived')),
    version integer NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    legacy_id bigint,
    note text,
    CONSTRAINT availability_slots_time_order CHECK (end_at > start_at)
) WITH (fillfactor = 90);
COMMENT ON TABLE availability_slots IS 'the calendar''s availability slots';
CREATE TABLE calendar_bookings (
    id bigserial PRIMARY KEY,
    slot_id uuid NOT NULL REFERENCES availability_slots (id)
);
CREATE FUNCTION calendar_note_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.note := coalesce(NEW.note, OLD.note);
    RETURN NEW;
END $$;
CREATE TRIGGER calendar_note_kept BEFORE UPDATE ON availability_slots
    FOR EACH ROW EXECUTE FUNCTION calendar_note_kept();
GRANT SELECT ON availability_slots TO PUBLIC;
GRANT UPDATE (note) ON availability_slots TO PUBLIC;
"""

# Built after the rows are in (faster than maintaining them row by row).
CALENDAR_INDEXES = """
CREATE UNIQUE INDEX availability_slots_legacy_id ON availability_slots (legacy_id);
CREATE INDEX availability_slots_tenant_start ON availability_slots (tenant_id, start_at);
"""
CALENDAR_SELECTION_INDEX = (
    f"CREATE INDEX {SELECTION_INDEX} ON availability_slots USING btree (status, start_at)"
)

# Rows numbered 1..n: one minute apart around `as_of`, the newest 10% still to
# come; of the past ones, every 20th Available (due), the others Booked, Expired
# or Archived.
FILL = """
INSERT INTO availability_slots
SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(),
       %(as_of)s + (i - %(past)s) * interval '1 minute',
       %(as_of)s + (i - %(past)s) * interval '1 minute' + interval '30 minutes',
       CASE WHEN i > %(past)s OR i %% 20 = 0 THEN 'Available'
            ELSE (ARRAY['Booked', 'Expired', 'Archived'])[1 + i %% 3] END,
       1, %(as_of)s, %(as_of)s, i, NULL
FROM generate_series(1, %(rows)s) AS i
"""


class IndexShape(StrEnum):
    """What the calendar's table has of the contract's index before migrate."""

    CALENDARS = "calendars"  # its own shape, (status, start_at)
    NONE = "none"


def create_calendar_table(
    url: str,
    rows: int,
    selection_index: IndexShape = IndexShape.CALENDARS,
    as_of: datetime | None = None,
) -> None:
    """The calendar's table with `rows` rows, analyzed, as a live calendar has it."""
    moment = as_of or datetime.now(UTC)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(CALENDAR_TABLE)
        past = rows - rows // 10
        conn.execute(FILL, {"as_of": moment, "past": past, "rows": rows})
        conn.execute(CALENDAR_INDEXES)
        if selection_index is IndexShape.CALENDARS:
            conn.execute(CALENDAR_SELECTION_INDEX)
        conn.execute("ANALYZE availability_slots")


@dataclass(frozen=True, slots=True)
class CalendarSnapshot:
    """Everything of the calendar's table that migrate must leave as it was."""

    table: tuple[Any, ...]  # owner, relacl, reloptions, relfilenode (a rewrite changes it), comment
    columns: tuple[tuple[Any, ...], ...]  # with their grants (attacl)
    constraints: tuple[tuple[Any, ...], ...]  # its own and those referencing it
    triggers: tuple[tuple[Any, ...], ...]  # its own and the foreign keys' internal ones
    indexes: dict[str, tuple[Any, ...]]  # definition, valid, ready, relfilenode
    row_count: int
    rows_checksum: str

    def without_index(self, name: str) -> CalendarSnapshot:
        others = {key: value for key, value in self.indexes.items() if key != name}
        return CalendarSnapshot(
            self.table,
            self.columns,
            self.constraints,
            self.triggers,
            others,
            self.row_count,
            self.rows_checksum,
        )


_TABLE = """
SELECT pg_get_userbyid(c.relowner), c.relacl::text, c.reloptions, c.relfilenode,
       obj_description(c.oid, 'pg_class'), c.relkind, c.relpersistence
FROM pg_class AS c WHERE c.oid = 'availability_slots'::regclass
"""
_COLUMNS = """
SELECT attnum, attname, format_type(atttypid, atttypmod), attnotnull, atthasdef, attacl::text
FROM pg_attribute
WHERE attrelid = 'availability_slots'::regclass AND attnum > 0 AND NOT attisdropped
ORDER BY attnum
"""
_CONSTRAINTS = """
SELECT conname, contype, conrelid::regclass::text, pg_get_constraintdef(oid), convalidated
FROM pg_constraint
WHERE conrelid = 'availability_slots'::regclass OR confrelid = 'availability_slots'::regclass
ORDER BY conname, conrelid::regclass::text
"""
_TRIGGERS = """
SELECT tgname, tgisinternal, tgenabled, pg_get_triggerdef(oid)
FROM pg_trigger WHERE tgrelid = 'availability_slots'::regclass
ORDER BY tgname
"""
_INDEXES = """
SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisvalid, i.indisready, c.relfilenode
FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
WHERE i.indrelid = 'availability_slots'::regclass
"""
# Each row's text, hashed, in id order, hashed again: any changed value shows.
_ROWS = """
SELECT count(*), md5(coalesce(string_agg(md5(s::text), '' ORDER BY s.id), ''))
FROM availability_slots AS s
"""


def calendar_snapshot(url: str) -> CalendarSnapshot:
    with psycopg.connect(url) as conn:
        table = conn.execute(_TABLE).fetchone()
        count, checksum = conn.execute(_ROWS).fetchone() or (0, "")
        assert table is not None
        return CalendarSnapshot(
            table=tuple(table),
            columns=tuple(tuple(row) for row in conn.execute(_COLUMNS).fetchall()),
            constraints=tuple(tuple(row) for row in conn.execute(_CONSTRAINTS).fetchall()),
            triggers=tuple(tuple(row) for row in conn.execute(_TRIGGERS).fetchall()),
            indexes={row[0]: tuple(row[1:]) for row in conn.execute(_INDEXES).fetchall()},
            row_count=int(count),
            rows_checksum=str(checksum),
        )


def selection_index_definition(url: str) -> tuple[str, bool] | None:
    """The contract's index: its definition and whether it is valid (None: absent)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT pg_get_indexdef(indexrelid), indisvalid FROM pg_index "
            "WHERE indexrelid = to_regclass(%s)",
            [SELECTION_INDEX],
        ).fetchone()
    return None if row is None else (str(row[0]), bool(row[1]))


def worker_relations(url: str) -> set[str]:
    """The worker's own tables that exist (none before migrate)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT relname::text FROM pg_class WHERE relname LIKE %s AND relkind = 'r'",
            ["slot\\_expiration\\_%"],
        ).fetchall()
    return {str(row[0]) for row in rows}


_SHAPE = (
    "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text "
    "FROM information_schema.columns WHERE table_schema = 'public'",
    "SELECT indexname::text, indexdef FROM pg_indexes WHERE schemaname = 'public'",
    "SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE connamespace = 'public'::regnamespace",
    "SELECT relname::text, coalesce(array_to_string(reloptions, ','), '') FROM pg_class "
    "WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'",
)


def schema_shape(url: str) -> tuple[set[tuple[str, ...]], ...]:
    """Tables, columns, indexes, constraints and table options of schema public, names and
    definitions: what two databases migrated alike have the same."""
    with psycopg.connect(url) as conn:
        return tuple(
            {tuple(str(v) for v in row) for row in conn.execute(statement).fetchall()}
            for statement in _SHAPE
        )

"""Partitioned calendars, as a calendar keeps years of history: availability_slots
partitioned by month of start_at with pg_partman (Debian's postgresql-15-partman), or by
hash on id; and what the worker's index looks like on them. This SQL arranges and
inspects tests; the product's own lives beside each concern (slot_expiration/*/*.sql).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg

SELECTION_INDEX = "ix_availability_slots_status_start"

COLUMNS = """
    id uuid NOT NULL,
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
    legacy_id bigint
"""
BY_MONTH = f"""
CREATE TABLE availability_slots ({COLUMNS}, PRIMARY KEY (id, start_at))
PARTITION BY RANGE (start_at)
"""
BY_HASH = f"""
CREATE TABLE availability_slots ({COLUMNS}, PRIMARY KEY (id)) PARTITION BY HASH (id)
"""
# The calendar's own index, on every partition (the load's updates find a slot by it).
LEGACY_INDEX = "CREATE INDEX availability_slots_legacy_id ON availability_slots (legacy_id)"

# Rows numbered 1..n, `spacing` apart, the first at `first`; of those started by
# `as_of` every 20th is Available (due), the others Booked, Expired or Archived; later
# ones are Available.
FILL = """
INSERT INTO availability_slots
SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(),
       %(first)s + (i - 1) * %(spacing)s,
       %(first)s + (i - 1) * %(spacing)s + interval '30 minutes',
       CASE WHEN %(first)s + (i - 1) * %(spacing)s > %(as_of)s OR i %% 20 = 0 THEN 'Available'
            ELSE (ARRAY['Booked', 'Expired', 'Archived'])[1 + i %% 3] END,
       1, %(as_of)s, %(as_of)s, i
FROM generate_series(1, %(rows)s) AS i
"""


@dataclass(frozen=True, slots=True)
class Months:
    """pg_partman's monthly partitions: from `first` (a month's first day) on, and
    `premake` months ahead of the current one made in advance."""

    first: datetime
    premake: int


def create_monthly_calendar(
    url: str, rows: int, months: Months, as_of: datetime, last: datetime
) -> None:
    """availability_slots partitioned by month of start_at by pg_partman, its rows spread
    evenly from `months.first` to before `last` (inside the partitions made), analyzed."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA partman")
        conn.execute("CREATE EXTENSION pg_partman SCHEMA partman")
        conn.execute(BY_MONTH)
        conn.execute(LEGACY_INDEX)
        conn.execute(
            "SELECT partman.create_parent('public.availability_slots', 'start_at', 'native', "
            "'monthly', p_premake := %(premake)s, p_start_partition := %(first)s)",
            {"premake": months.premake, "first": months.first.strftime("%Y-%m-%d")},
        )
        spacing = (last - months.first) / rows
        conn.execute(
            FILL, {"first": months.first, "spacing": spacing, "as_of": as_of, "rows": rows}
        )
        conn.execute("ANALYZE availability_slots")


def create_hash_calendar(url: str, rows: int, partitions: int, as_of: datetime) -> None:
    """availability_slots partitioned by hash on id into `partitions`, rows a minute apart
    around `as_of` (nine tenths started), analyzed."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(BY_HASH)
        for remainder in range(partitions):
            conn.execute(
                f"CREATE TABLE availability_slots_h{remainder} PARTITION OF availability_slots "
                f"FOR VALUES WITH (modulus {partitions}, remainder {remainder})"
            )
        minute = timedelta(minutes=1)
        first = as_of - (rows - rows // 10) * minute
        conn.execute(FILL, {"first": first, "spacing": minute, "as_of": as_of, "rows": rows})
        conn.execute("ANALYZE availability_slots")


@dataclass(frozen=True, slots=True)
class PartitionIndexes:
    """The worker's index on a partitioned table: whether the parent's is valid, and
    each partition with the name of its attached part (None: not attached)."""

    valid: bool | None
    partitions: dict[str, str | None]

    @property
    def every_partition_indexed(self) -> bool:
        return bool(self.partitions) and None not in self.partitions.values()


def partition_indexes(url: str) -> PartitionIndexes:
    with psycopg.connect(url) as conn:
        valid = conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
            [SELECTION_INDEX],
        ).fetchone()
        rows = conn.execute(
            """
            SELECT c.relname::text, (
                SELECT ic.relname::text
                FROM pg_inherits AS h
                JOIN pg_index AS i ON i.indexrelid = h.inhrelid
                JOIN pg_class AS ic ON ic.oid = i.indexrelid
                WHERE h.inhparent = to_regclass(%s) AND i.indrelid = c.oid
            )
            FROM pg_inherits AS p JOIN pg_class AS c ON c.oid = p.inhrelid
            WHERE p.inhparent = 'availability_slots'::regclass
            ORDER BY 1
            """,
            [SELECTION_INDEX],
        ).fetchall()
    return PartitionIndexes(None if valid is None else bool(valid[0]), {str(n): i for n, i in rows})


def run_partman_maintenance(url: str, premake: int) -> None:
    """pg_partman's maintenance with a longer premake: the partitions it creates ahead."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE partman.part_config SET premake = %s", [premake])
        conn.execute("SELECT partman.run_maintenance('public.availability_slots')")

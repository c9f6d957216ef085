"""What a migration script asks of the run it belongs to, online or offline (--sql).

- whether availability_slots is the calendar's (adopted) rather than created by
  migration 0001: then no migration touches it beyond the worker's own index;
- what the calendar's `ix_availability_slots_status_start` is, if it has one,
  and whether the table is partitioned (and which partitions lack the index);
- whether each object a migration creates is missing: every migration creates
  only what is missing, so `migrate` can run them again (replaying) to repair
  what the worker owns at the revision the schema is at;
- how to build an index CONCURRENTLY without the session's lock_timeout, and
  how to run statements each in a transaction of its own;
- notes for the operator (what adoption kept or left out, what a repair
  recreated), printed by migrate.

Online, the answers come from the database (named statements of migrate.sql
and status.sql, on the migration's own connection); offline nothing can be
inspected, and they come from migrate's flags (--adopt): everything is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from alembic import context, op
from psycopg.rows import dict_row

from slot_expiration.db.errors import ContractMismatchError
from slot_expiration.db.statements import query

# config.attributes keys, set by store.migrate.
ADOPT: Final = "adopt"  # offline only: write the adoption path
LOCK_TIMEOUT_MS: Final = "lock_timeout_ms"
NOTES: Final = "notes"
REPLAY: Final = "replay"  # the migrations run again, up to the schema's revision: a repair
RECREATED_TABLES: Final = "recreated_tables"


def offline() -> bool:
    return bool(op.get_context().as_sql)


def replaying() -> bool:
    """Whether the migrations run again over a schema already at (or past) them, to
    recreate what is missing of the worker's own (store.migrate.repair)."""
    return bool(_attributes().get(REPLAY, False))


def table_missing(name: str) -> bool:
    return offline() or not _answer("relation_exists", {"name": name})


def column_missing(table: str, column: str) -> bool:
    return offline() or not _answer("column_exists", {"table": table, "column": column})


def constraint_missing(table: str, name: str) -> bool:
    return offline() or not _answer("constraint_exists", {"table": table, "name": name})


def constraint_validated(table: str, name: str) -> bool:
    """Whether the constraint exists and was validated (offline: not known, so not)."""
    return not offline() and _answer("constraint_validated", {"table": table, "name": name})


def index_validity(name: str) -> bool | None:
    """Whether the index `name` is valid; None when there is none (always, offline)."""
    if offline():
        return None
    row = _fetch_one("index_validity", {"name": name})
    return None if row is None else bool(row[0])


def slot_table_autovacuum_set() -> bool:
    """Whether migration 0005's setting is on availability_slots (offline: not known)."""
    return not offline() and _answer("slot_table_autovacuum_set")


def slot_table_partitioned() -> bool:
    """Whether availability_slots is partitioned (offline: not known, so not)."""
    return not offline() and bool(_answer("slot_table_partitioned"))


def partitions_without_index() -> list[tuple[str, str | None, bool]]:
    """Each partition of availability_slots whose index is not yet attached to the
    worker's: (partition, an index of the worker's shape already on it or None,
    whether that one is valid)."""
    rows = _fetch_all("partitions_without_worker_index")
    return [(str(p), None if i is None else str(i), bool(v)) for p, i, v in rows]


def recreated(what: str, *, part_of: str | None = None) -> None:
    """Say, in a repair, that `what` was missing and is created again; nothing of a
    table (`part_of`) that is itself created again in this repair (it says it)."""
    if not replaying():
        return
    tables: set[str] = _attributes().setdefault(RECREATED_TABLES, set())
    if part_of is not None and part_of in tables:
        return
    if what.startswith("table "):
        tables.add(what.removeprefix("table "))
    note(f"repaired: {what} was missing, created again")


def slot_table_exists() -> bool:
    """Migration 0001's question: is there a table to adopt?"""
    if offline():
        return bool(_attributes().get(ADOPT, False))
    row = _fetch_one("migrate_starting_point")
    return bool(row and row[0])


def adopted() -> bool:
    """Whether availability_slots is the calendar's (recorded by migration 0001)."""
    if offline():
        return bool(_attributes().get(ADOPT, False))
    row = _fetch_one("slot_table_adopted")
    return bool(row and row[0])


def mark_adopted() -> None:
    op.execute(_statement("mark_slot_table_adopted"))


def record_slot_table_schema() -> None:
    """Record which availability_slots the worker adopted (migration 0008)."""
    op.execute(_statement("record_slot_table_schema"))


def adoption_problems(connection: Any, *, status_values: bool = True) -> tuple[str, ...]:
    """Every reason the existing availability_slots cannot be adopted: the catalog's
    (the contract, migrate's privileges) and, with `status_values`, the values its
    rows hold and its checks allow (a full read of the table; only where the column
    reads as text, else the statement could not compare it)."""
    with connection.cursor() as cursor:
        problems = [row[0] for row in cursor.execute(query("adoption_problems")).fetchall()]
        if status_values and cursor.execute(query("status_values_readable")).fetchone()[0]:
            problems += [row[0] for row in cursor.execute(query("status_value_mismatches"))]
    return tuple(problems)


def require_adoptable() -> None:
    """Offline: the script's guard. Online, migrate checked it all before Alembic started
    (store.migrate), changing nothing when it failed; here the catalog again, which is
    cheap (the status values' full read is not repeated: the migration lock kept
    every other migrate out meanwhile)."""
    if offline():
        op.execute(_statement("adoption_guard"))
        return
    if problems := adoption_problems(_dbapi(), status_values=False):
        raise ContractMismatchError(problems)


def require_no_slot_table() -> None:
    """Offline: the empty database's script stops where the calendar's table exists
    already (its guard, migrate.sql's creation_guard). Online, migrate checked it before
    Alembic started (store.migrate)."""
    if offline():
        op.execute(_statement("creation_guard"))


def selection_index() -> tuple[str, bool] | None:
    """The existing `ix_availability_slots_status_start`: (definition, valid); None when
    there is none (or offline, where nothing can be known)."""
    if offline():
        return None
    with _dbapi().cursor(row_factory=dict_row) as cursor:
        row = cursor.execute(query("status_selection_index")).fetchone()
    return None if row is None else (str(row["definition"]), bool(row["valid"]))


@contextmanager
def each_in_its_own_transaction() -> Iterator[None]:
    """Outside the migration's transaction: each statement commits at once, keeping the
    session's lock_timeout, so the lock it takes is held for that statement alone
    (attaching an index to a partitioned one, say), never until the migration ends."""
    with op.get_context().autocommit_block():
        yield


@contextmanager
def concurrently() -> Iterator[None]:
    """Outside a transaction, and without the session's lock_timeout, for CREATE or
    DROP INDEX CONCURRENTLY.

    Such a build takes a lock that no write waits for (SHARE UPDATE EXCLUSIVE),
    but it waits for every older transaction to end, through locks that
    lock_timeout would cut short, leaving an INVALID index behind. Everything
    else keeps the worker's lock_timeout.
    """
    with op.get_context().autocommit_block():
        op.execute("SET lock_timeout = 0")
        try:
            yield
        finally:
            op.execute(f"SET lock_timeout = {lock_timeout_ms()}")


def lock_timeout_ms() -> int:
    return int(_attributes()[LOCK_TIMEOUT_MS])


def note(text: str) -> None:
    """A line for the operator: migrate prints it after its result; offline, a comment
    in the script."""
    if offline():
        op.get_context().impl.static_output(f"-- {text}")
        return
    _attributes().setdefault(NOTES, []).append(text)


def _statement(name: str) -> str:
    """A named statement for op.execute, which ends each statement itself."""
    return query(name).rstrip().removesuffix(";")


def _attributes() -> dict[str, Any]:
    attributes: dict[str, Any] = context.config.attributes
    return attributes


def _dbapi() -> Any:
    """psycopg's own connection under SQLAlchemy's: the store's statements run as
    written, parameters and all, inside the migration's transaction."""
    return op.get_bind().connection.dbapi_connection


def _fetch_all(name: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    with _dbapi().cursor() as cursor:
        cursor.execute(query(name), params)
        return list(cursor.fetchall())


def _fetch_one(name: str, params: dict[str, Any] | None = None) -> tuple[Any, ...] | None:
    rows = _fetch_all(name, params)
    return rows[0] if rows else None


def _answer(name: str, params: dict[str, Any] | None = None) -> bool:
    row = _fetch_one(name, params)
    return bool(row and row[0])
